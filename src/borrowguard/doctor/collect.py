"""Collect a snapshot of this environment from package metadata, without importing what it describes.

Nothing here imports torch, vllm, transformers or tokenizers: versions come from importlib.metadata,
the CUDA build of torch from the text of torch/version.py, GPUs from nvidia-smi, and NCCL from the
nvidia-nccl wheel's metadata or libnccl's ncclGetVersion. Only `deep=True` runs torch, in a subprocess.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from borrowguard._version import __version__
from borrowguard.doctor.snapshot import (
    MAX_GPUS,
    Snapshot,
    clean,
    is_relevant_env,
    normalize_machine,
    redact_env,
)
from borrowguard.knowledge import KnowledgeBase

PACKAGES = (
    "vllm",
    "transformers",
    "tokenizers",
    "torch",
    "sglang",
    "xgrammar",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "borrowguard",
)
"""Always reported, installed or not."""
REQUIRES_OF = ("vllm", "transformers")
"""Packages whose declared requirements are recorded (vLLM's for the mismatch check)."""
NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")
PLUGIN_GROUP = "vllm.general_plugins"
PLUGIN_NAME = "borrowguard"
NVIDIA_SMI_TIMEOUT_S = 5.0
DEEP_TIMEOUT_S = 120.0


def collect(kb: KnowledgeBase | None = None, deep: bool = False) -> Snapshot:
    """Describe this environment. `kb` adds the packages its rules mention; `deep` also asks torch."""
    notes: list[str] = []
    requires = {name: _base_requirements(md.requires(name) or ()) for name in REQUIRES_OF if _version(name)}
    names = set(PACKAGES) | set(_rule_packages(kb)) | set(_requirement_names(requires.get("vllm", ())))
    packages = {canonicalize_name(name): _version(name) for name in sorted(names)}
    smi = _nvidia_smi()
    cuda = {k: v for k, v in {"torch_build": _torch_cuda_build(), **smi.cuda}.items() if v}
    nccl_version, nccl_source = _nccl(packages)
    snapshot = Snapshot(
        source="live",
        borrowguard_version=__version__,
        python_version=platform.python_version(),
        python_implementation=platform.python_implementation(),
        system=platform.system() or None,
        os=_os_name(),
        machine=normalize_machine(platform.machine()),
        packages=MappingProxyType(packages),
        requires=MappingProxyType({canonicalize_name(k): v for k, v in requires.items()}),
        nccl_version=nccl_version,
        nccl_source=nccl_source,
        cuda=MappingProxyType(cuda),
        gpus=smi.gpus,
        plugin_registered=_plugin_registered(),
        env=MappingProxyType(redact_env({k: clean(v) for k, v in os.environ.items() if is_relevant_env(k)})),
        notes=tuple(notes + smi.notes),
    )
    return _deepen(snapshot) if deep else snapshot


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _rule_packages(kb: KnowledgeBase | None) -> Iterable[str]:
    for problem in kb or ():
        if problem.detect and isinstance(problem.detect.get("packages"), Mapping):
            yield from problem.detect["packages"]


def _base_requirements(lines: Iterable[str]) -> tuple[str, ...]:
    # Requirements of optional extras do not bind a plain install; keeping them would only add noise.
    kept = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or "extra" not in str(req.marker):
            kept.append(line)
    return tuple(kept)


def _requirement_names(requirements: Iterable[str]) -> Iterable[str]:
    for line in requirements:
        try:
            yield Requirement(line).name
        except InvalidRequirement:
            continue


def _os_name() -> str | None:
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as fh:
            for line in fh.read(64_000).splitlines():
                if line.startswith("PRETTY_NAME="):
                    return clean(line.split("=", 1)[1].strip().strip('"'))
    except OSError:
        pass
    return clean(platform.platform(terse=True)) or None


def _plugin_registered() -> bool:
    # The same lookup vLLM's plugin loader does, so "registered" means "vLLM will find it".
    eps = md.entry_points(group=PLUGIN_GROUP)
    return any(ep.name == PLUGIN_NAME and ep.value.startswith("borrowguard.") for ep in eps)


def _torch_cuda_build() -> str | None:
    # torch/version.py holds `cuda: Optional[str] = '12.8'`; reading it avoids importing torch (seconds).
    spec = importlib.util.find_spec("torch") if _version("torch") else None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        try:
            text = (Path(location) / "version.py").read_text(encoding="utf-8", errors="replace")[:20_000]
        except OSError:
            continue
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        return match.group(1) if match else None
    return None


def _nccl(packages: Mapping[str, str | None]) -> tuple[str | None, str | None]:
    # The wheel is what torch and vLLM load; a system libnccl matters only without one.
    for name in NCCL_PACKAGES:
        version = packages.get(name)
        if version:
            return version, f"{name} package"
    version = _nccl_from_library()
    return (version, "libnccl ncclGetVersion") if version else (None, None)


def _nccl_from_library() -> str | None:
    for name in ("libnccl.so.2", "libnccl.so", "libnccl.2.dylib"):
        try:
            lib = ctypes.CDLL(name)
            code = ctypes.c_int(0)
            if lib.ncclGetVersion(ctypes.byref(code)) != 0:
                continue
        except (OSError, AttributeError):
            continue
        return decode_nccl_version(code.value)
    return None


def decode_nccl_version(code: int) -> str:
    """ncclGetVersion's integer: X*10000+Y*100+Z since NCCL 2.9, X*1000+Y*100+Z before."""
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


class _Smi:
    def __init__(self) -> None:
        self.cuda: dict[str, str] = {}
        self.gpus: tuple[str, ...] = ()
        self.notes: list[str] = []


def _nvidia_smi() -> _Smi:
    out = _Smi()
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return out
    # Both queries run at once: nvidia-smi can take a few hundred ms each on a cold driver.
    try:
        procs = [
            subprocess.Popen(
                [exe, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            for args in (["--query-gpu=name,driver_version", "--format=csv,noheader"], [])
        ]
    except OSError as exc:
        out.notes.append(f"nvidia-smi could not run: {exc.strerror or exc}")
        return out
    texts = []
    for proc in procs:
        try:
            stdout, _ = proc.communicate(timeout=NVIDIA_SMI_TIMEOUT_S)
            texts.append(stdout[:1_000_000] if proc.returncode == 0 else "")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out.notes.append(f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:.0f} s")
            texts.append("")
    query, plain = texts
    gpus = []
    for line in query.splitlines():
        name, _, driver = line.rpartition(",")
        if name.strip():
            gpus.append(clean(name.strip()))
            out.cuda.setdefault("driver", clean(driver.strip()))
    out.gpus = tuple(gpus[:MAX_GPUS])
    match = re.search(r"CUDA Version:\s*([0-9][0-9.]*)", plain)
    if match:
        out.cuda["driver_cuda"] = match.group(1)
    return out


_DEEP_SCRIPT = r"""
import json
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    try:
        if torch.version.cuda is not None:  # a CPU build has no NCCL to ask (and no nccl.version to call)
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        out["nccl_error"] = f"{type(exc).__name__}: {exc}"
    out["cuda_available"] = torch.cuda.is_available()
    if out["cuda_available"]:
        out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def _deepen(snapshot: Snapshot) -> Snapshot:
    """Ask torch itself, in a child process, which CUDA and NCCL it runs with."""
    if not snapshot.version("torch"):
        return snapshot.with_notes("deep check: torch is not installed; nothing more to ask")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _DEEP_SCRIPT],
            capture_output=True,
            text=True,
            timeout=DEEP_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        info: Any = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except subprocess.TimeoutExpired:
        return snapshot.with_notes(f"deep check: importing torch took longer than {DEEP_TIMEOUT_S:.0f} s")
    except (OSError, ValueError) as exc:
        return snapshot.with_notes(f"deep check: could not ask torch: {exc}")
    if not isinstance(info, dict) or "error" in info:
        return snapshot.with_notes(f"deep check: torch failed: {clean(str(info.get('error', info)))}")
    cuda = dict(snapshot.cuda)
    if info.get("cuda"):
        cuda["torch_runtime"] = clean(str(info["cuda"]))
    build = "" if info.get("cuda") else " (a CPU build: no CUDA, no NCCL)"
    notes = [f"deep check: torch {clean(str(info.get('torch')))}{build}, CUDA available: {info.get('cuda_available')}"]
    nccl_version, nccl_source = snapshot.nccl_version, snapshot.nccl_source
    if info.get("nccl"):
        # What torch reports is what it actually loaded: it wins over metadata.
        nccl_version, nccl_source = clean(str(info["nccl"])), "torch.cuda.nccl.version()"
    elif info.get("nccl_error"):
        notes.append(f"deep check: torch.cuda.nccl.version() failed: {clean(str(info['nccl_error']))}")
    gpus = tuple(clean(str(g)) for g in info.get("gpus") or ()) or snapshot.gpus
    return replace(
        snapshot, cuda=MappingProxyType(cuda), nccl_version=nccl_version, nccl_source=nccl_source, gpus=gpus
    ).with_notes(*notes)
