"""The schema of `[problem.detect]` tables: what doctor can check, validated when the rules load.

Evaluation lives in `borrowguard.doctor.rules`; this module only knows the shape, so that a typo in a
user's `--rules` file fails at load time with the rule id and the field instead of never firing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from borrowguard.knowledge.model import SEVERITIES

CHECKS = ("vllm-requirements",)
"""Built-in procedural checks, for what version ranges cannot express."""

FIELDS = (
    "python", "machine", "system", "packages", "nccl", "guard", "check", "guarded_severity", "fallback", "server",
)
SERVER_NUMBERS = (
    "max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs", "renderer_num_workers",
)
"""Numeric facts of a server's configuration (from its start-up log lines) that `server` may compare."""
SERVER_NAMES = ("structured_outputs_backend",)
"""Named facts that `server` may require to be one of a list."""


def validate_detect(detect: Any, fail: Callable[[str, str], Exception]) -> None:
    """Raise `fail(field, message)` for the first thing wrong in a detect table."""
    if not isinstance(detect, Mapping):
        raise fail("detect", "must be a table")
    if not detect:
        raise fail("detect", "must hold at least one condition")
    for key, value in detect.items():
        field = f"detect.{key}"
        if key not in FIELDS:
            raise fail(field, f"is not a known condition (known: {', '.join(FIELDS)})")
        if key in ("python", "nccl"):
            _specifier(value, field, fail)
        elif key in ("machine", "system"):
            if not (isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)):
                raise fail(field, "must be a non-empty list of strings")
        elif key == "packages":
            if not isinstance(value, Mapping) or not value:
                raise fail(field, 'must be a table of package = "specifier"')
            for name, spec in value.items():
                _specifier(spec, f"{field}.{name}", fail)
        elif key == "guard":
            if not isinstance(value, bool):
                raise fail(field, "must be true or false")
        elif key == "check":
            if value not in CHECKS:
                raise fail(field, f"must be one of {', '.join(CHECKS)}")
        elif key == "guarded_severity":
            if value not in SEVERITIES:
                raise fail(field, f"must be one of {', '.join(SEVERITIES)}")
        elif key == "fallback":
            _fallback(value, detect.get("check"), field, fail)
        elif key == "server":
            _server(value, field, fail)


def _specifier(value: Any, field: str, fail: Callable[[str, str], Exception]) -> SpecifierSet:
    if not isinstance(value, str):
        raise fail(field, 'must be a version specifier string such as ">=1.2,<2" ("" = any version)')
    try:
        return SpecifierSet(value)
    except InvalidSpecifier:
        raise fail(field, f"{value!r} is not a valid version specifier") from None


def _server(value: Any, field: str, fail: Callable[[str, str], Exception]) -> None:
    if not isinstance(value, Mapping) or not value:
        raise fail(field, 'must be a table of fact = ">=2" (numbers) or fact = ["name", ...]')
    for name, spec in value.items():
        where = f"{field}.{name}"
        if name in SERVER_NUMBERS:
            _specifier(spec, where, fail)
        elif name in SERVER_NAMES:
            if not (isinstance(spec, list) and spec and all(isinstance(v, str) and v for v in spec)):
                raise fail(where, "must be a non-empty list of names")
        else:
            raise fail(where, f"is not a known server fact (known: {', '.join((*SERVER_NUMBERS, *SERVER_NAMES))})")


def _fallback(value: Any, check: Any, field: str, fail: Callable[[str, str], Exception]) -> None:
    if check != "vllm-requirements":
        raise fail(field, 'is only meaningful with check = "vllm-requirements"')
    if not isinstance(value, list):
        raise fail(field, "must be an array of tables ([[problem.detect.fallback]])")
    for i, entry in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"vllm", "requires"}:
            raise fail(where, "must have exactly the keys vllm and requires")
        _specifier(entry["vllm"], f"{where}.vllm", fail)
        requires = entry["requires"]
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise fail(f"{where}.requires", "must be a list of requirement strings")
        for req in requires:
            try:
                Requirement(req)
            except InvalidRequirement:
                raise fail(f"{where}.requires", f"{req!r} is not a valid requirement") from None


def server_condition(detect: Mapping[str, Any], facts: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """Evaluate `detect.server` against a server's known facts: (evidence, facts the condition needs that
    are not known), or None when a known fact contradicts it. A rule without `server` gives ([], [])."""
    evidence: list[str] = []
    unknown: list[str] = []
    for name, spec in (detect.get("server") or {}).items():
        value = facts.get(name)
        if value is None:
            unknown.append(name)
        elif name in SERVER_NAMES:
            if str(value) not in spec:
                return None
            evidence.append(f"{name} {value} (one of {', '.join(spec)})")
        elif SpecifierSet(spec).contains(str(value), prereleases=True):
            evidence.append(f"{name} {value} ({spec})")
        else:
            return None
    return evidence, unknown


def vllm_range(detect: Mapping[str, Any]) -> str | None:
    """The vLLM versions a rule is about (its `packages.vllm` specifier), None when it names none."""
    packages = detect.get("packages") or {}
    spec = packages.get("vllm")
    return spec if isinstance(spec, str) else None
