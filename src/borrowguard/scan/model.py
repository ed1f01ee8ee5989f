"""What a scan produces: hits (one occurrence), findings (per-problem aggregates), the causal chain."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from borrowguard._compat import StrEnum
from borrowguard.knowledge.model import Confidence, Severity, jsonable
from borrowguard.scan.startup import StartupFacts

MAX_EXCERPT = 300
MAX_PROCESSES = 8
MAX_DETAILS = 32


_SECRET = re.compile(
    r"(?i)(\b(?:api[_-]?key|access[_-]?token|token|secret|password|passwd)\b[\"']?\s{0,3}[=:]\s{0,3}[\"']?"
    r"|\bBearer\s{1,3})[^\s\"'&,;]{1,512}"
    r"|\b(?:sk|hf|ghp|gho|xox[bp])[-_][A-Za-z0-9_-]{8,512}"
)


def redact(text: str) -> str:
    """Credentials that a log line may carry (a query string, an Authorization header) never reach a report."""
    return _SECRET.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


def excerpt(text: str, limit: int = MAX_EXCERPT) -> str:
    """Printable, bounded, without credentials: a hostile log must not smuggle terminal escapes into the
    report, and an operator's log must not leak a key into a report they share."""
    text = redact(text[: limit * 2])
    text = "".join(ch if ch.isprintable() or ch == "\t" else "\uFFFD" for ch in text)
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Hit:
    """One occurrence of a known problem in one source."""

    id: str
    severity: Severity
    source: str
    line_no: int
    timestamp: str | None
    process: str | None
    text: str
    detail: str | None = None
    confidence: Confidence = Confidence.HIGH
    evidence: str | None = None
    """Why this problem and this confidence, in words (which context decided it), when a rule says."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "confidence": self.confidence.value,
            "source": self.source,
            "line": self.line_no,
            "timestamp": self.timestamp,
            "process": self.process,
            "excerpt": self.text,
            **({"detail": self.detail} if self.detail is not None else {}),
            **({"evidence": self.evidence} if self.evidence is not None else {}),
        }


def _where(hit: Hit) -> dict[str, Any]:
    return {"source": hit.source, "line": hit.line_no, "timestamp": hit.timestamp}


@dataclass
class LogFinding:
    """Every occurrence of one problem, aggregated in constant memory."""

    id: str
    severity: Severity
    title: str
    first: Hit
    last: Hit
    count: int = 1
    explanation: str = ""
    remedies: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    processes: list[str] = field(default_factory=list)
    details: Counter[str] = field(default_factory=Counter)
    confidence: Confidence = Confidence.LOW
    """The surest of its occurrences."""
    evidence: str | None = None
    """What made the surest occurrence that sure, in words."""
    cause: str | None = None
    """For an engine death: EngineCore's own final exception, when the log shows it."""
    via_tokenizer: bool = False
    """For an engine death: the traceback of that exception runs through tokenizer frames."""

    def add(self, hit: Hit) -> None:
        self.count += 1
        self.last = hit
        self._note(hit)

    def _note(self, hit: Hit) -> None:
        if hit.process and hit.process not in self.processes and len(self.processes) < MAX_PROCESSES:
            self.processes.append(hit.process)
        if hit.detail is not None:
            key = hit.detail if hit.detail in self.details or len(self.details) < MAX_DETAILS else "other"
            self.details[key] += 1
        if hit.confidence.rank > self.confidence.rank or (self.evidence is None and hit.confidence is self.confidence):
            self.confidence = hit.confidence
            self.evidence = hit.evidence if hit.evidence is not None else self.evidence

    def copy(self) -> LogFinding:
        return replace(self, processes=list(self.processes), details=Counter(self.details))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "confidence": self.confidence.value,
            "title": self.title,
            "count": self.count,
            "first": _where(self.first),
            "last": _where(self.last),
            "process": self.first.process,
            "processes": list(self.processes),
            "excerpt": self.first.text,
            "details": dict(self.details.most_common()),
            "cause": self.cause,
            "evidence": self.evidence,
            "explanation": self.explanation,
            "remedies": list(self.remedies),
            "references": list(self.references),
            "related": list(self.related),
        }


class Role(StrEnum):
    """Where a problem stands in the causal chain."""

    ROOT = "root"
    """Nothing found explains it."""
    CONSEQUENCE = "consequence"
    """`caused_by` names what does."""
    ENVIRONMENT = "environment"
    """A problem of the installed stack that the log problem points at, from the knowledge base."""


@dataclass(frozen=True)
class ChainStep:
    """One problem in the order the operator should read them: causes before consequences."""

    id: str
    title: str
    role: Role
    caused_by: tuple[str, ...] = ()
    advice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)  # type: ignore[no-any-return]


@dataclass
class ScanResult:
    findings: list[LogFinding]
    chain: list[ChainStep]
    lines: int
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    server: StartupFacts | None = None
    """The server's configuration, from its start-up lines, when the log has them."""
    notes: list[str] = field(default_factory=list)
    """About the input, not problems with it: lines cut to their ends, a UTF-16 log decoded, a binary
    file skipped, a rotated .gz read once in follow mode."""
    input_failed: bool = False
    """A log source failed (a command exited with an error, a file became unreadable)."""

    @property
    def input_exit_code(self) -> int:
        """2: a log source failed; 1: the input is incomplete (`warnings`: a cut .gz, a command that wrote
        nothing); 0: read as given. A scan whose input failed is never a clean bill."""
        return 2 if self.input_failed else 1 if self.warnings else 0

    @property
    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    @property
    def exit_code(self) -> int:
        """0: nothing (or only info), 1: warnings, 2: errors; and never below `input_exit_code`."""
        worst = self.worst
        found = 0 if worst is None else {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}[worst]
        return max(found, self.input_exit_code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "chain": [s.to_dict() for s in self.chain],
            "lines": self.lines,
            "sources": list(self.sources),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "input_failed": self.input_failed,
            "server": self.server.to_dict() if self.server is not None else None,
        }
