"""What a verify run found, as data: the verdict, its reasons, the checks that ran, per-level results.

Everything here serialises to the JSON document `borrowguard.verify/1` (`VerifyResult.to_dict()`), which
the HTML report renders and users' automation reads; field names are stable.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from borrowguard._compat import StrEnum
from borrowguard._text import redact
from borrowguard._version import __version__

SCHEMA = "borrowguard.verify/1"


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"  # the run could not happen (exit 2)
    INCOMPLETE = "INCOMPLETE"  # interrupted before the planned end (exit 2)

    @property
    def exit_code(self) -> int:
        return {"PASS": 0, "FAIL": 1}.get(self.value, 2)


class ReasonCode(StrEnum):
    TOKENIZER_ERRORS = "tokenizer-errors"
    ENGINE_DEAD = "engine-dead"
    REQUEST_ERRORS = "request-errors"
    PROMPT_TOKENS_MISMATCH = "prompt-tokens-mismatch"
    NO_SUCCESS = "no-success"
    COULD_NOT_RUN = "could-not-run"
    WORKLOAD_MISMATCH = "workload-mismatch"  # nothing valid could be sent: ours, not the server's (exit 2)


@dataclass
class Reason:
    code: ReasonCode
    message: str
    level: int | None = None  # the sweep level's concurrency, when it belongs to one
    key: str | None = None  # what the reason is about (a repeat key...): one reason per key across levels

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "level": self.level}


class CheckState(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not-run"


class CheckName(StrEnum):
    LOG = "log"  # no tokenizer error or engine death in the server's log
    REQUESTS = "requests"  # every request of ours got a 2xx
    PROMPT_TOKENS = "prompt-tokens"  # identical requests got identical usage.prompt_tokens
    HEALTH = "health"  # the health endpoint kept answering


@dataclass
class Check:
    """One of the verdict's checks, and whether it could run: a PASS only vouches for the checks that ran."""

    name: CheckName
    state: CheckState
    detail: str = ""


@dataclass
class MismatchGroup:
    """Requests the server refused because of what we sent (too long, no vision, no tool parser...)."""

    scenario: str
    kind: str
    count: int
    message: str
    fix: str


@dataclass
class LevelResult:
    concurrency: int
    elapsed: float
    summary: dict[str, Any]
    series: dict[str, Any]
    reasons: list[Reason]
    cancelled_in_flight: int = 0

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "elapsed_s": round(self.elapsed, 3),
            "passed": self.passed,
            "reasons": [r.to_dict() for r in self.reasons],
            "cancelled_in_flight": self.cancelled_in_flight,
            "summary": self.summary,
            "series": self.series,
        }


@dataclass
class VerifyResult:
    verdict: Verdict
    reasons: list[Reason]
    config: Any  # VerifyConfig (typed loosely to keep this module free of the config's imports)
    levels: list[LevelResult] = field(default_factory=list)
    target: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    workload: dict[str, Any] = field(default_factory=dict)  # fitting, mismatches, skipped scenarios
    findings: list[Any] = field(default_factory=list)  # load.watch.Finding
    finding_counts: dict[str, int] = field(default_factory=dict)
    log_lines: int = 0
    log_sources: list[dict[str, Any]] = field(default_factory=list)
    health: dict[str, Any] | None = None
    metrics_scrape: dict[str, Any] | None = None
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    started_at: str = ""
    elapsed: float = 0.0
    secrets: list[str] = field(default_factory=list, repr=False)  # masked wherever they appear (API key)

    @property
    def exit_code(self) -> int:
        return Verdict(self.verdict).exit_code

    @property
    def highest_passing(self) -> int | None:
        passing = [lvl.concurrency for lvl in self.levels if lvl.passed]
        return max(passing) if passing else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON document; a secret the server echoed (an API key in a log line) is masked everywhere."""
        return redact(self._document(), self.secrets)

    def _document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reasons": [r.to_dict() for r in self.reasons],
            "checks": [asdict(c) for c in self.checks],
            "interrupted": self.interrupted,
            "highest_passing_concurrency": self.highest_passing,
            "started_at": self.started_at,
            "elapsed_s": round(self.elapsed, 3),
            "target": self.target,
            "config": self.config.to_dict(),
            "environment": environment(),
            "workload": self.workload,
            "levels": [lvl.to_dict() for lvl in self.levels],
            "log": {
                "lines": self.log_lines,
                "sources": self.log_sources,
                "finding_counts": self.finding_counts,
                "findings": [f.to_dict() for f in self.findings],
            },
            "health": self.health,
            "metrics": self.metrics_scrape,
            "notes": self.notes,
        }


def environment() -> dict[str, Any]:
    """The client side of the run (the server's side is in `target`)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": sys.platform,
        "borrowguard": __version__,
    }
    for dist in ("transformers", "tokenizers", "aiohttp"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    return env
