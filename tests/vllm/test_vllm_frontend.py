"""Proof on real vLLM frontend code: `make test-vllm` (runs inside the environment of scripts/vllm_env.py).

Each scenario is a fresh process (plugins load once per process) running frontend_driver.py, which builds
vLLM's own tokenizer and renderer for a tiny model directory and hammers them from 8 threads with mixed
truncation settings, comparing every result with a serial, single-thread reference computed UNGUARDED in a
process of its own (BORROWGUARD_DISABLE=1). The pool tests (vLLM >= 0.21) are in test_vllm_pool.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from frontend_driver import write_model_dir
from packaging.version import Version

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "frontend_driver.py"
TIMEOUT_S = 300
MIN_CALLS = 500  # a run that did too little proves nothing either way

def _release(dist: str) -> tuple[int, ...]:
    return Version(metadata.version(dist)).release


# The stack on which unprotected concurrent calls raise: tokenizers <= 0.22 and a vLLM without a pool.
RAISING_STACK = _release("tokenizers") < (0, 23) and _release("vllm") < (0, 21)

INSTALLED_LINE = "tokenizer guard installed"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BORROWGUARD_DISABLE", "VLLM_PLUGINS")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="session")
def expected(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The serial reference, computed unguarded in its own process."""
    return reference_file(model_dir, tmp_path_factory.mktemp("reference"))


def reference_file(model_dir: Path, tmp_path: Path) -> Path:
    report = drive("reference", model_dir, tmp_path, BORROWGUARD_DISABLE="1")
    assert report["guard_installed"] is False
    return tmp_path / "reference.json"


def drive(mode: str, model_dir: Path, tmp_path: Path, expected: Path | None = None, *, min_calls: int = MIN_CALLS,
          **env: str) -> dict:
    """Run the driver; its hammer goes on past its seconds until `min_calls` calls ran (a busy machine gets
    more time, never a weaker check: at load 15 four seconds gave 150 calls)."""
    out = tmp_path / f"{mode}.json"
    log = tmp_path / f"{mode}.log"  # vLLM's own log of the run: kept for the failure message
    cmd = [sys.executable, str(DRIVER), "--mode", mode, "--model-dir", str(model_dir), "--out", str(out),
           "--min-calls", str(min_calls)]
    if expected is not None:
        cmd += ["--expected", str(expected)]
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env(**env), timeout=TIMEOUT_S,
                              cwd=tmp_path)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    assert proc.returncode == 0, f"driver failed ({mode}):\n{tail}"
    report = json.loads(out.read_text())
    shown = {k: v for k, v in report.items() if k not in ("hammer", "expected", "probes_before", "probes_after")}
    print(json.dumps(shown, indent=1))
    if "hammer" in report:
        print(json.dumps({k: v for k, v in report["hammer"].items() if k != "examples"}, indent=1))
    return report


def assert_versions_named(line: str) -> None:
    for dist in ("transformers", "tokenizers", "vllm"):
        assert f"{dist} {metadata.version(dist)}" in line, line


def test_without_borrowguard_vllm_frontend_fails(model_dir: Path, expected: Path, tmp_path: Path) -> None:
    report = drive("bare", model_dir, tmp_path, expected, BORROWGUARD_DISABLE="1")
    [line] = report["plugin_log"]  # vLLM did load the plugin; the plugin stood down
    assert line.startswith("INFO ") and "disabled by BORROWGUARD_DISABLE" in line
    assert_versions_named(line)
    assert report["guard_installed"] is False
    assert report["reference_errors"] == 0, "the serial reference itself must succeed"
    hammer = report["hammer"]
    assert hammer["calls"] >= MIN_CALLS
    if RAISING_STACK:
        borrowed = hammer["exceptions"].get("Already borrowed", 0)
        assert borrowed >= 0.15 * hammer["calls"], hammer
    else:  # newer stacks: wrong results or none; the run is reported, not judged
        print("unprotected run on a non-raising stack:", hammer["exceptions"], hammer["wrong_outputs"])


@pytest.mark.parametrize("mode", ["plugin", "late"])
def test_with_plugin_every_call_is_exact(mode: str, model_dir: Path, expected: Path, tmp_path: Path) -> None:
    report = drive(mode, model_dir, tmp_path, expected)
    [line] = report["plugin_log"]
    assert line.startswith("INFO ") and INSTALLED_LINE in line, line
    assert_versions_named(line)
    assert report["guard_installed"] is True
    assert report["platform"] == "CpuPlatform"
    # vLLM's dynamic subclasses must be in play: CachedX (and, from vLLM 0.21 on, TokenizerPoolCachedX).
    assert "Cached" in report["tokenizer_class"], report["tokenizer_class"]
    if mode == "late":
        # The tokenizer existed before plugins loaded, and the renderer runs on that very object (vLLM 0.19)
        # or on a shallow copy sharing its backend (vLLM >= 0.21).
        assert report["plugins_loaded_before_late_load"] is False
        assert report["tokenizer_is_early"] or report["tokenizer_shares_early_backend"]
    hammer = report["hammer"]
    assert report["reference_errors"] == 0
    assert report["fast_detokenizer"] is True, "vLLM's DecodeStream path must be the one exercised"
    assert hammer["calls"] >= MIN_CALLS
    assert set(hammer["calls_by_shape"]) >= shapes(report)
    assert report["warmup_wrong"] == []
    assert hammer["exceptions"] == {}, hammer["examples"]
    assert hammer["wrong_outputs"] == {}, hammer["examples"]
    assert_mutation_seen(report["mutation"])


SHAPES = {"completion", "completion-truncate", "completion-left", "chat", "chat+tools", "chat+tools-truncate",
          "detokenize", "decode-stream", "bad_words", "tokenize", "backend"}


def shapes(report: dict) -> set[str]:
    """Every call shape the driver must have run (encode_plus where transformers still has it: 4.x)."""
    return SHAPES | ({"encode_plus"} if report["has_encode_plus"] else set())


def assert_mutation_seen(mutation: dict) -> None:
    """A runtime add_special_tokens under load: calls before it see the old vocabulary, calls that start
    after it returned see the new one, calls that overlap it see one or the other."""
    assert "raised" not in mutation, mutation
    assert mutation.get("before_calls", 0) > 0 and mutation.get("after_calls", 0) > 0, mutation
    for phase in ("before", "during", "after"):
        assert mutation.get(f"{phase}_wrong", 0) == 0, mutation


CLI = """
import sys
sys.path.insert(0, {here!r})
from frontend_driver import force_cpu_platform
force_cpu_platform()
sys.argv = ["vllm", "serve", "--help"]
from vllm.entrypoints.cli.main import main
main()
"""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, INSTALLED_LINE),
        ({"VLLM_PLUGINS": "lora_filesystem_resolver"}, None),
    ],
    ids=["default", "not-allow-listed"],
)
def test_vllm_cli_loads_the_plugin_while_building_its_parser(env: dict, expected: str | None) -> None:
    # `vllm serve` itself (its CLI main, on the CPU platform): the plugin runs before any tokenizer exists.
    proc = subprocess.run(
        [sys.executable, "-c", CLI.format(here=str(HERE))],
        capture_output=True, text=True, env=_env(**env), timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "usage: vllm serve" in proc.stdout  # the parser really was built
    # vLLM's format: "INFO 11-30 10:20:26 [vllm.py:66] borrowguard 0.1.0: ..."
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "] borrowguard " in ln]
    if expected is None:
        assert lines == [], "vLLM must not run a plugin that VLLM_PLUGINS leaves out"
    else:
        assert len(lines) == 1 and lines[0].startswith("INFO ") and expected in lines[0], lines
