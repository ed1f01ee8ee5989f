#!/usr/bin/env python3
"""Build (once) and cache the lean vLLM environment in which `make test-vllm` runs tests/vllm/.

    python3.11 scripts/vllm_env.py            # prints the environment's python on the last line
    BORROWGUARD_VLLM_VERSION=0.33.0 python3.11 scripts/vllm_env.py

The environment lives OUTSIDE the clone, in ${BORROWGUARD_VLLM_CACHE:-~/.cache/borrowguard}/vllm-VERSION,
so that it survives between a session and CI and is shared by every clone. It holds:

- vLLM's wheel, installed with --no-deps (its compiled kernels are never loaded: only the frontend runs);
- the CPU build of torch (TORCH below; on this kind of machine pip takes it from a wheel on local disk —
  a plain `pip install torch` would fetch a multi-GB CUDA build);
- vLLM's own Requires-Dist, read from the wheel, minus the GPU-only ones (SKIP below) and minus the
  torch family, which the CPU torch replaces;
- the transformers/tokenizers pair under test (5.5.3 + 0.22.2: the "Already borrowed" stack);
- pytest, and this repository installed editable with --no-deps (redone when the clone moves).

A half-built environment is never reused: the marker file is written last and names everything the
build depended on; any difference rebuilds from scratch.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VLLM_VERSION = os.environ.get("BORROWGUARD_VLLM_VERSION", "0.19.1")
TORCH = os.environ.get("BORROWGUARD_VLLM_TORCH", "2.13.0")
TRANSFORMERS = os.environ.get("BORROWGUARD_VLLM_TRANSFORMERS", "5.5.3")
TOKENIZERS = os.environ.get("BORROWGUARD_VLLM_TOKENIZERS", "0.22.2")
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
EXTRA_TOOLS = ["pytest>=8.0", "pytest-timeout>=2.3", "setuptools>=77"]
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
        "vllm": VLLM_VERSION,
        "torch": TORCH,
        "transformers": TRANSFORMERS,
        "tokenizers": TOKENIZERS,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "skip": SKIP.pattern,
        "extra": " ".join(EXTRA_TOOLS),
        "revision": str(BUILD_REVISION),
    }


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def requirements_of(wheel: Path, python: Path) -> list[str]:
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
        if SKIP.match(name) or name.lower() in {"transformers", "tokenizers"}:
            skipped.append(name)
        else:
            kept.append(spec)
    log(f"vLLM requirements kept: {len(kept)}; skipped (GPU-only or replaced): {', '.join(sorted(skipped))}")
    return kept


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
    wheels = CACHE / "wheels"
    wheels.mkdir(exist_ok=True)
    found = sorted(wheels.glob(f"vllm-{VLLM_VERSION}-*.whl"))
    if not found:
        run([py, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), f"vllm=={VLLM_VERSION}"])
        found = sorted(wheels.glob(f"vllm-{VLLM_VERSION}-*.whl"))
    wheel = found[-1]
    run([*pip, "--no-deps", str(wheel)])
    constraints = ENV / "constraints.txt"
    constraints.write_text(
        f"torch=={TORCH}\ntransformers=={TRANSFORMERS}\ntokenizers=={TOKENIZERS}\n", encoding="utf-8"
    )
    reqs = requirements_of(wheel, python_of(ENV))
    pins = [f"transformers=={TRANSFORMERS}", f"tokenizers=={TOKENIZERS}"]
    # pip then reports vLLM's GPU requirements as missing and its torch pin as unmet: expected, harmless.
    run([*pip, "-c", str(constraints), *reqs, *pins, *EXTRA_TOOLS])
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
