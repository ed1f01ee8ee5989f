"""Evaluate the knowledge base's `[problem.detect]` tables against a snapshot: findings with evidence."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from borrowguard._switches import DISABLE_ENV, PLUGIN_NAME, allowed_by_vllm_plugins, is_on
from borrowguard.doctor.snapshot import Snapshot, normalize_machine
from borrowguard.knowledge import KnowledgeBase, Problem, Severity
from borrowguard.knowledge.detect import server_condition
from borrowguard.knowledge.model import jsonable

MAX_EVIDENCE = 20


@dataclass(frozen=True)
class EnvFinding:
    """A known problem that applies to the environment, with the facts that made it fire."""

    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...]
    remedies: tuple[str, ...]
    references: tuple[str, ...]
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class GuardStatus:
    active: bool
    reason: str
    remedy: str | None = None
    """A setting that would activate an installed but inactive plugin."""


@dataclass(frozen=True)
class Diagnosis:
    """The snapshot and the findings, worst first."""

    environment: Snapshot
    findings: tuple[EnvFinding, ...]
    guard: GuardStatus

    @property
    def worst(self) -> Severity | None:
        return self.findings[0].severity if self.findings else None

    def exit_code(self, strict: bool = False) -> int:
        """0: nothing or info only; 1: warnings (2 with `strict`); 2: errors. An incomplete report (see
        Snapshot.lacks) is at least a warning."""
        if self.worst is Severity.ERROR:
            return 2
        if self.worst is Severity.WARNING or self.environment.lacks:
            return 2 if strict else 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment.to_dict(), "findings": [f.to_dict() for f in self.findings]}


def diagnose(snapshot: Snapshot, kb: KnowledgeBase) -> Diagnosis:
    """Every problem of `kb` whose detect conditions all hold for `snapshot`."""
    guard = guard_status(snapshot)
    findings = []
    for problem in kb:
        if problem.detect is None:
            continue  # a log signature only: scan's business
        evaluated = _evaluate(problem.detect, snapshot, guard)
        if evaluated is None:
            continue
        evidence, unknown = evaluated
        severity = problem.severity
        if unknown:
            # The versions match but how the server runs is not known here: say what it depends on.
            severity = Severity.INFO
            evidence.append(
                f"applies only if the server runs with {', '.join(unknown)} as the rule says; not known here "
                "(borrowguard doctor --log SERVER.LOG reads it from the server's start-up lines)"
            )
        lowered = problem.detect.get("guarded_severity")
        if lowered and guard.active and lowered != severity:
            severity = Severity(lowered)
            evidence.append(f"severity lowered to {lowered}: {guard.reason}")
        remedies = problem.remedies
        if lowered and not guard.active:
            evidence.append(f"guard not active: {guard.reason}")
            if guard.remedy:
                remedies = (guard.remedy, *remedies)
        findings.append(_finding(problem, severity, evidence, remedies))
    findings.sort(key=lambda f: (-f.severity.rank, f.id))
    return Diagnosis(snapshot, tuple(findings), guard)


def guard_status(snapshot: Snapshot) -> GuardStatus:
    """Whether borrowguard's vLLM plugin will load in this environment, and why (not)."""
    # The plugin's own rules (borrowguard.integrations.vllm), applied to the snapshot's variables.
    disable = snapshot.env.get(DISABLE_ENV)
    plugins = snapshot.env.get("VLLM_PLUGINS")
    if snapshot.plugin_registered is None:
        return GuardStatus(False, "unknown whether borrowguard is installed (not in the snapshot)")
    if not snapshot.plugin_registered:
        return GuardStatus(False, "borrowguard's vllm.general_plugins entry point is not registered")
    if is_on(disable):
        return GuardStatus(False, f"{DISABLE_ENV}={disable} turns the guard off", f"unset {DISABLE_ENV}")
    if not snapshot.version("vllm"):
        return GuardStatus(
            False,
            "borrowguard's vLLM plugin is registered but vLLM is not installed "
            "(other servers: `borrowguard run -- ...` or borrowguard.install())",
        )
    if not allowed_by_vllm_plugins(plugins):
        return _plugins_status(plugins or "")
    allowed = "VLLM_PLUGINS unset" if plugins is None else f"VLLM_PLUGINS={plugins!r} lists it"
    return GuardStatus(True, f"borrowguard's vLLM plugin is registered ({allowed}) and not disabled")


def _plugins_status(plugins: str) -> GuardStatus:
    """VLLM_PLUGINS is set and vLLM will skip the plugin: why, and the value that lists it. When it lists
    the name with blanks, quotes or another case (vLLM compares names exactly), the fix is to write it
    as vLLM reads it, not to add it a second time."""
    names = [p.strip().strip("'\"").strip() for p in plugins.split(",")]
    near = [raw for raw, name in zip(plugins.split(","), names) if name.lower() == PLUGIN_NAME]
    fixed = list(dict.fromkeys(PLUGIN_NAME if n.lower() == PLUGIN_NAME else n for n in names if n))
    if not near:
        return GuardStatus(
            False,
            f"VLLM_PLUGINS={plugins!r} does not list {PLUGIN_NAME}, so vLLM skips the plugin",
            f"export VLLM_PLUGINS={shlex.quote(','.join([*fixed, PLUGIN_NAME]))}",
        )
    raw = near[0]
    bare = raw.strip().strip("'\"").strip()
    fixes = [
        *(["remove the blanks around it"] if raw != raw.strip() else []),
        *(["remove the quotes"] if raw.strip() != raw.strip().strip("'\"") else []),
        *(["write it in lower case"] if bare != PLUGIN_NAME else []),
    ]
    return GuardStatus(
        False,
        f"VLLM_PLUGINS={plugins!r} does not list {PLUGIN_NAME} exactly: it has {raw!r}, and vLLM compares "
        "names as written (blanks, quotes and case included), so it skips the plugin",
        f"export VLLM_PLUGINS={shlex.quote(','.join(fixed))}   # {PLUGIN_NAME} is already listed, as "
        f"{raw!r}: {', '.join(fixes)} (vLLM reads the names exactly as written); do not add it again",
    )


def _finding(problem: Problem, severity: Severity, evidence: list[str], remedies: tuple[str, ...]) -> EnvFinding:
    if len(evidence) > MAX_EVIDENCE:
        evidence = [*evidence[:MAX_EVIDENCE], f"... and {len(evidence) - MAX_EVIDENCE} more"]
    return EnvFinding(
        id=problem.id,
        severity=severity,
        title=problem.title,
        evidence=tuple(evidence),
        remedies=remedies,
        references=problem.references,
        explanation=problem.explanation,
    )


def _evaluate(
    detect: Mapping[str, Any], snap: Snapshot, guard: GuardStatus
) -> tuple[list[str], list[str]] | None:
    """(evidence, server facts the rule needs that are not known) when every condition holds (or, for
    server facts, cannot be told); None as soon as one does not hold or cannot be known."""
    evidence: list[str] = []
    unknown: list[str] = []
    for key, value in detect.items():
        if key in ("guarded_severity", "fallback"):
            continue
        if key == "server":
            server = server_condition(detect, snap.server)
            if server is None:
                return None
            evidence.extend(server[0])
            unknown.extend(server[1])
            continue
        lines = _CONDITIONS[key](value, snap, guard, detect)
        if lines is None:
            return None
        evidence.extend(lines)
    return evidence, unknown


def _in(version: str | None, spec: str) -> bool:
    if version is None:
        return False
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _python(spec: str, snap: Snapshot, *_: Any) -> list[str] | None:
    return [f"Python {snap.python_version} ({spec})"] if _in(snap.python_version, spec) else None


def _nccl(spec: str, snap: Snapshot, *_: Any) -> list[str] | None:
    if not _in(snap.nccl_version, spec):
        return None
    return [f"NCCL {snap.nccl_version} ({spec}), from {snap.nccl_source or 'unknown source'}"]


def _machine(allowed: Any, snap: Snapshot, *_: Any) -> list[str] | None:
    names = {normalize_machine(a) for a in allowed}
    return [f"machine {snap.machine}"] if snap.machine in names else None


def _system(allowed: Any, snap: Snapshot, *_: Any) -> list[str] | None:
    names = {a.lower() for a in allowed}
    return [f"system {snap.system}"] if snap.system and snap.system.lower() in names else None


def _packages(specs: Mapping[str, str], snap: Snapshot, *_: Any) -> list[str] | None:
    evidence = []
    for name, spec in specs.items():
        version = snap.version(name)
        if not _in(version, spec):
            return None
        evidence.append(f"{name} {version}" + (f" ({spec})" if spec else " installed"))
    return evidence


def _guard(wanted: bool, snap: Snapshot, guard: GuardStatus, *_: Any) -> list[str] | None:
    return [guard.reason] if guard.active == wanted else None


def _check(name: str, snap: Snapshot, guard: GuardStatus, detect: Mapping[str, Any]) -> list[str] | None:
    return _CHECKS[name](snap, detect)


def _vllm_requirements(snap: Snapshot, detect: Mapping[str, Any]) -> list[str] | None:
    vllm = snap.version("vllm")
    if not vllm:
        return None
    declared = snap.requires.get("vllm")
    origin = f"declared by vLLM {vllm}"
    if declared is None:
        # No metadata (a collect-env text): fall back to the requirements the knowledge base knows.
        declared = tuple(
            req
            for entry in detect.get("fallback", ())
            if _in(vllm, entry["vllm"])
            for req in entry["requires"]
        )
        origin = f"known requirement of vLLM {vllm} (the snapshot lacks vLLM's own metadata)"
    environment = _marker_environment(snap)
    violations = []
    for line in declared:
        try:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(environment):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, ValueError):
            continue  # cannot be judged from this snapshot
        if not snap.knows(req.name):
            continue  # collect-env texts list only some packages
        installed = snap.version(req.name)
        if installed is None:
            violations.append(f"{req.name} is not installed; {req} is {origin}")
        elif str(req.specifier) and not _in(installed, str(req.specifier)):
            violations.append(f"{req.name} {installed} is installed; {req} is {origin}")
    return violations or None


def _marker_environment(snap: Snapshot) -> dict[str, str]:
    # Markers are judged for the snapshot's machine, not for the one doctor runs on.
    py = snap.python_version or ""
    system = (snap.system or "").lower()
    return {
        "python_version": ".".join(py.split(".")[:2]),
        "python_full_version": py,
        "implementation_name": (snap.python_implementation or "cpython").lower(),
        "platform_python_implementation": snap.python_implementation or "CPython",
        "platform_machine": snap.machine or "",
        "platform_system": snap.system or "",
        "sys_platform": {"linux": "linux", "darwin": "darwin", "windows": "win32"}.get(system, system),
        "os_name": "nt" if system == "windows" else "posix",
        "platform_release": "",
        "platform_version": "",
        "implementation_version": py,
        "extra": "",
    }


_CHECKS: dict[str, Callable[[Snapshot, Mapping[str, Any]], list[str] | None]] = {
    "vllm-requirements": _vllm_requirements,
}
_CONDITIONS: dict[str, Callable[..., list[str] | None]] = {
    "python": _python,
    "machine": _machine,
    "system": _system,
    "packages": _packages,
    "nccl": _nccl,
    "guard": _guard,
    "check": _check,
}
