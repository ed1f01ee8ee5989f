"""Parse the text printed by `vllm collect-env` and `python -m torch.utils.collect_env` into a snapshot.

Both print "Key: value" lines (vLLM pads the key with spaces), the `lscpu` block ("Architecture: aarch64"),
"GPU 0: NVIDIA ..." lines, pip/conda package lines ("[pip3] transformers==4.57.1") and, for vLLM, an
environment-variable section ("NAME=value"). Users paste these into issues, so the text may be reflowed,
indented, truncated or hostile: unknown lines are ignored, lines are length-capped, values are cleaned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from borrowguard.doctor.snapshot import (
    MAX_ENV,
    MAX_GPUS,
    MAX_PACKAGES,
    Snapshot,
    clean,
    is_relevant_env,
    normalize_machine,
    redact_env,
)
from borrowguard.errors import UserInputError

MAX_LINE = 4000
"""Longer lines are skipped: no line of a collect-env report comes close."""

_KEY_VALUE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ()/._\-]{0,60}?)\s*:\s*(.*?)\s*$")
_PIP = re.compile(r"^\s*\[pip\d*\]\s+([A-Za-z0-9][A-Za-z0-9._\-]*)\s*==\s*(\S+)")
_CONDA = re.compile(r"^\s*\[conda\]\s+([A-Za-z0-9][A-Za-z0-9._\-]*)\s+(\d\S*)")
_GPU = re.compile(r"GPU\s+\d+\s*:\s*(.+?)(?:\s*\(UUID:.*)?$")
_ENV = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)=(.*)$")
_NCCL_LINE = re.compile(r"\bNCCL version\s*[:=]?\s*(\d+\.\d+\.\d+)")
_LSCPU_ARCH = re.compile(r"\bArchitecture\s*:\s*(\S+)")  # also "CPU: Architecture: aarch64" on one line
_ARCH_IN_TEXT = re.compile(r"\b(aarch64|arm64|x86_64|amd64|ppc64le|s390x)\b", re.IGNORECASE)
_VERSION_TOKEN = re.compile(r"^v?(\d[0-9A-Za-z.+!\-]*)")

# The lines that identify a collect-env report; a text with none of them is not one.
_MARKERS = frozenset({"pytorch version", "vllm version", "python version", "os", "python platform"})
# "Key: value" lines about CUDA, and the name each is kept under.
_CUDA_KEYS = {
    "cuda used to build pytorch": "torch_build",
    "cuda runtime version": "runtime",
    "nvidia driver version": "driver",
}


def parse_collect_env(text: str) -> Snapshot:
    """A snapshot from collect-env text; raises UserInputError when the text is not such a report."""
    report = _CollectEnvReport()
    for raw in text.splitlines():
        if len(raw) <= MAX_LINE:
            report.read_line(raw.rstrip())
    if report.markers == 0:
        raise UserInputError(
            "not a borrowguard snapshot nor the output of `vllm collect-env` / "
            "`python -m torch.utils.collect_env` (no 'PyTorch version', 'vLLM Version', 'OS', "
            "'Python version' or '[pip3] name==version' line found)"
        )
    packages, facts, machines = report.packages, report.facts, report.machines
    notes = _add_versions_from_facts(packages, facts)
    nccl_version, nccl_source = _nccl(packages, report.nccl_line)
    machine = machines.get("lscpu") or machines.get("os") or machines.get("platform")
    python = _version_of(facts.get("python version", ""))
    return Snapshot(
        source="collect-env",
        python_version=python,
        python_implementation=None,
        system=clean(facts["system"], 40) if facts.get("system") else None,
        os=clean(facts["os"]) if facts.get("os") else None,
        machine=normalize_machine(clean(machine, 40)) if machine else None,
        packages=MappingProxyType(packages),
        nccl_version=nccl_version,
        nccl_source=nccl_source,
        cuda=MappingProxyType(report.cuda),
        gpus=tuple(report.gpus),
        # A collect-env report lists borrowguard only if it is installed; absent means unknown.
        plugin_registered=True if packages.get("borrowguard") else None,
        env=MappingProxyType(redact_env(report.env)),
        notes=tuple(notes),
    )


@dataclass
class _CollectEnvReport:
    """What the lines of a collect-env report say, gathered one line at a time (each kept to its cap)."""

    packages: dict[str, str] = field(default_factory=dict)
    cuda: dict[str, str] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    """The "os", "system" and "... version" lines, the first of each kept."""
    machines: dict[str, str] = field(default_factory=dict)
    """The CPU architecture as each place names it: "lscpu", "os", "platform"."""
    nccl_line: str | None = None
    markers: int = 0
    """Lines that only a collect-env report has; none means the text is not one."""

    def read_line(self, line: str) -> None:
        if self._package(line) or self._env_var(line):
            return
        self._anywhere_in_line(line)
        if m := _KEY_VALUE.match(line):
            self._key_value(_key(m.group(1)), m.group(2))

    def _package(self, line: str) -> bool:
        """A "[pip3] name==version" or "[conda] name version" line."""
        if not (m := _PIP.match(line) or _CONDA.match(line)):
            return False
        if len(self.packages) < MAX_PACKAGES:
            self.packages[canonicalize_name(m.group(1))] = clean(m.group(2))
        self.markers += 1
        return True

    def _env_var(self, line: str) -> bool:
        """A "NAME=value" line (vLLM's environment section): kept when relevant, redacted later."""
        if not (m := _ENV.match(line)):
            return False
        if is_relevant_env(m.group(1)) and len(self.env) < MAX_ENV:
            self.env[m.group(1)] = clean(m.group(2))
        return True

    def _anywhere_in_line(self, line: str) -> None:
        """What may appear inside another line: the NCCL version, a GPU, lscpu's architecture."""
        if self.nccl_line is None and (m := _NCCL_LINE.search(line)):
            self.nccl_line = m.group(1)
        if (m := _GPU.search(line)) and len(self.gpus) < MAX_GPUS:
            self.gpus.append(clean(m.group(1)))
        if m := _LSCPU_ARCH.search(line):
            self.machines.setdefault("lscpu", m.group(1))

    def _key_value(self, key: str, value: str) -> None:
        if key in _MARKERS:
            self.markers += 1
        if key == "os":
            self.facts.setdefault("os", value)
            if arch := _ARCH_IN_TEXT.search(value):
                self.machines.setdefault("os", arch.group(1))
        elif key == "python platform":
            if arch := _ARCH_IN_TEXT.search(value):
                self.machines.setdefault("platform", arch.group(1))
            self.facts.setdefault("system", value.split("-", 1)[0])
        elif key in ("pytorch version", "vllm version", "python version"):
            self.facts.setdefault(key, value)
        elif key in _CUDA_KEYS:
            _set(self.cuda, _CUDA_KEYS[key], value)


def _add_versions_from_facts(packages: dict[str, str], facts: dict[str, str]) -> list[str]:
    """torch and vllm from their "... version" lines when no package line named them; notes for versions
    that cannot be read."""
    notes: list[str] = []
    for key, package in (("pytorch version", "torch"), ("vllm version", "vllm")):
        if key in facts and package not in packages:
            version = _version_of(facts[key])
            if version:
                packages[package] = version
            elif facts[key] and facts[key].upper() not in ("N/A", "COULD NOT COLLECT"):
                notes.append(f"unrecognised {key}: {clean(facts[key], 80)!r}")
    return notes


def _nccl(packages: dict[str, str], nccl_line: str | None) -> tuple[str | None, str | None]:
    """(NCCL version, where it was read): its pip package first, else an "NCCL version" line."""
    for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
        if packages.get(name):
            return packages[name], f"{name} package (collect-env)"
    if nccl_line:
        return nccl_line, "NCCL version line (collect-env)"
    return None, None


def _key(raw: str) -> str:
    return " ".join(raw.lower().split())


def _set(target: dict[str, str], key: str, value: str) -> None:
    if value and value.upper() not in ("N/A", "COULD NOT COLLECT") and key not in target:
        target[key] = clean(value, 80)


def _version_of(value: str) -> str | None:
    """The version at the start of "0.10.1.1 (git sha: 1da94e6)" or "3.12.11 (main, ...)", if valid."""
    m = _VERSION_TOKEN.match(value.strip())
    if not m:
        return None
    token = m.group(1)
    try:
        Version(token)
    except InvalidVersion:
        return None
    return token
