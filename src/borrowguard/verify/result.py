"""What a verify run found, as data: the verdict, its reasons, the checks that ran, per-level results.

Everything here serialises to the JSON document `borrowguard.verify/1` (`VerifyResult.to_dict()`, written
by borrowguard.verify.document), which the HTML report renders and users' automation reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from borrowguard._compat import StrEnum
from borrowguard.exit_codes import ExitCode
from borrowguard.load.summary import LevelSummary, Series

if TYPE_CHECKING:
    from borrowguard.load.fit import FitSummary
    from borrowguard.verify.preflight import Target
    from borrowguard.verify.watch import HealthSummary, LogEvent, LogSource, MetricsScrape

SCHEMA = "borrowguard.verify/1"


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"  # the run could not happen (exit 2)
    INCOMPLETE = "INCOMPLETE"  # interrupted before the planned end (exit 2)

    @property
    def exit_code(self) -> ExitCode:
        return {"PASS": ExitCode.OK, "FAIL": ExitCode.PROBLEM}.get(self.value, ExitCode.ERROR)


class ReasonCode(StrEnum):
    TOKENIZER_ERRORS = "tokenizer-errors"
    ENGINE_DEAD = "engine-dead"
    REQUEST_ERRORS = "request-errors"
    PROMPT_TOKENS_MISMATCH = "prompt-tokens-mismatch"
    VECTOR_MISMATCH = "vector-mismatch"  # identical pooling requests got vectors beyond the tolerance
    NO_SUCCESS = "no-success"
    COULD_NOT_RUN = "could-not-run"
    WORKLOAD_MISMATCH = "workload-mismatch"  # nothing valid could be sent: ours, not the server's (exit 2)


@dataclass(frozen=True)
class Reason:
    code: ReasonCode
    message: str
    level: int | None = None  # the sweep level's concurrency, when it belongs to one
    key: str | None = None  # what the reason is about (a repeat key...): one reason per key across levels


class CheckState(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not-run"


class CheckName(StrEnum):
    LOG = "log"  # no tokenizer error or engine death in the server's log
    REQUESTS = "requests"  # every request of ours got a 2xx
    PROMPT_TOKENS = "prompt-tokens"  # identical requests got identical usage.prompt_tokens
    VECTORS = "vectors"  # identical pooling requests got the same vectors (listed only where some came back)
    HEALTH = "health"  # the health endpoint kept answering


@dataclass(frozen=True)
class Check:
    """One of the verdict's checks, and whether it could run: a PASS only vouches for the checks that ran."""

    name: CheckName
    state: CheckState
    detail: str = ""


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    elapsed: float
    summary: LevelSummary
    series: Series
    reasons: list[Reason]
    cancelled_in_flight: int = 0

    @property
    def passed(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class VerifyResult:
    verdict: Verdict
    reasons: list[Reason]
    config: Any  # VerifyConfig (typed loosely to keep this module free of the config's imports)
    levels: list[LevelResult] = field(default_factory=list)
    target: Target | None = None  # None: the bundled server did not start
    checks: list[Check] = field(default_factory=list)
    fit: FitSummary | None = None  # how the workload was fitted to the server's context (None: no load)
    findings: list[LogEvent] = field(default_factory=list)
    finding_counts: dict[str, int] = field(default_factory=dict)
    log_lines: int = 0
    log_sources: list[LogSource] = field(default_factory=list)
    health: HealthSummary | None = None
    metrics_scrape: MetricsScrape | None = None
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    started_at: str = ""
    elapsed: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        return Verdict(self.verdict).exit_code

    @property
    def highest_passing(self) -> int | None:
        passing = [lvl.concurrency for lvl in self.levels if lvl.passed]
        return max(passing) if passing else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (borrowguard.verify.document)."""
        from borrowguard.verify.document import to_dict

        return to_dict(self)
