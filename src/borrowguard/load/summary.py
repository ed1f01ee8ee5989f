"""What one level of load produced, as frozen values: what the verdict reads and the renderers show.

`LoadMetrics.summary(elapsed)` (load/metrics.py) builds a `LevelSummary` from its running tallies; nothing
here changes afterwards. The JSON form (`borrowguard.verify/1`'s "summary" and "series") is written in one
place, borrowguard.verify.document; field names here are the library's words, the JSON keys are the
document's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from borrowguard.load.faults import Fault, MismatchKind

STATUS_CLASSES = ("2xx", "4xx", "5xx", "error")


@dataclass(frozen=True)
class Percentiles:
    """Seconds (None: nothing was measured)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class ScenarioSummary:
    count: int
    ok: int
    statuses: Mapping[str, int]  # label ("200", "500", "reset"...) -> requests
    latency: Percentiles  # of the successful requests
    ttft: Percentiles | None  # time to first token, streamed answers only
    completion_tokens: int
    output_tokens_per_s: float | None


@dataclass(frozen=True)
class ErrorGroup:
    """Failed requests of one scenario with one label and one culprit, with a bounded sample of messages."""

    scenario: str
    status: str  # the outcome's label: an HTTP status or what went wrong without one ("reset", "timeout")
    fault: Fault
    mismatch: MismatchKind | None
    count: int
    first_t: float
    messages: tuple[str, ...]


@dataclass(frozen=True)
class RepeatStats:
    """The `usage.prompt_tokens` seen for one identical request, with when each value first showed up."""

    prompt_tokens: Mapping[int, int]  # value -> how many answers said it
    first_seen: Mapping[int, float]  # value -> seconds into the level
    without_usage: int
    # the serial reference (load.reference): the same request sent alone before the load
    reference: int | None = None  # its usage.prompt_tokens; None: no reference, or none in its answer
    # vectors (pooling answers): each compared with the reference's, or without one with the first under load
    vectors_compared: int = 0
    vectors_differing: int = 0
    vector_max_distance: float | None = None  # the largest relative L2 distance seen

    @property
    def consistent(self) -> bool:
        """Identical requests under load agreed with each other."""
        return len(self.prompt_tokens) <= 1

    @property
    def matches_reference(self) -> bool:
        """Every answer under load said what the request got when sent alone (no reference: True)."""
        return self.reference is None or set(self.prompt_tokens) <= {self.reference}

    @property
    def compared(self) -> int:
        """usage.prompt_tokens values compared: each answer with the reference, or without one with the first."""
        answers = sum(self.prompt_tokens.values())
        return answers if self.reference is not None else max(0, answers - 1)


@dataclass(frozen=True)
class SeriesPoint:
    """One slice of the level's time axis."""

    t: float
    count: int
    classes: Mapping[str, int]  # STATUS_CLASSES present in the slice -> requests
    p50: float | None
    p95: float | None
    max: float | None
    inflight_max: int
    findings: Mapping[str, int]  # log finding id -> lines
    health_failures: int


@dataclass(frozen=True)
class Series:
    width: float  # seconds per point
    points: tuple[SeriesPoint, ...]


@dataclass(frozen=True)
class LevelSummary:
    requests: int
    ok: int
    requests_per_s: float | None
    latency: Percentiles
    scenarios: Mapping[str, ScenarioSummary]
    errors_by_fault: Mapping[Fault, int]
    tied_resets: int  # resets right after an error answer, counted with that answer
    retried: int  # requests sent again once: the server had closed their keep-alive connection
    error_groups: tuple[ErrorGroup, ...]  # the largest first
    error_groups_dropped: int
    repeats: Mapping[str, RepeatStats]  # by repeat key
    # 5xx answers with an empty message: vLLM's bad_words path answers so when its tokenizer call raises
    empty_5xx: int = 0
    empty_5xx_bad_words: int = 0  # ... of them on requests that asked for bad_words
    # requests still in flight when the drain after the planned end ran out, no slower than the level's
    # slowest answer allows (load.metrics.UNFINISHED_FACTOR): not in `requests`, neither answered nor failed
    unfinished: int = 0
    slowest_answer: float = 0.0  # seconds: the slowest request that got any HTTP answer

    @property
    def errors(self) -> int:
        return self.requests - self.ok

    @property
    def error_rate(self) -> float:
        return round(self.errors / self.requests, 6) if self.requests else 0.0

    def failed_for(self, fault: Fault) -> int:
        return self.errors_by_fault.get(fault, 0)

    @property
    def valid(self) -> int:
        """Requests that fit the server: those it refused for what we sent are the workload's own."""
        return self.requests - self.failed_for(Fault.WORKLOAD)

    def groups(self, *, workload: bool) -> list[ErrorGroup]:
        """The error groups that are the workload's (True) or the server's and the tokenizer's (False)."""
        return [g for g in self.error_groups if (g.fault is Fault.WORKLOAD) == workload]
