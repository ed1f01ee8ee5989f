"""Aggregation as results arrive, in memory that does not grow with the run's length.

- Percentiles come from fixed log-scale histograms (≈2% relative error), not from stored samples.
- The time axis is a list of buckets that starts at one second per bucket and doubles the width (merging
  neighbours) whenever it would exceed `max_buckets`: an hours-long run keeps the same few hundred kB.
- Error messages, repeat observations and log findings keep a bounded sample plus exact counts.

The running tallies here are mutable and private to the run; `LoadMetrics.summary()` hands out a frozen
`LevelSummary` (load/summary.py).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from borrowguard.load.client import Outcome
from borrowguard.load.faults import Fault, MismatchKind
from borrowguard.load.reference import VECTOR_TOLERANCE, Reference, distance
from borrowguard.load.summary import (
    STATUS_CLASSES,
    ErrorGroup,
    LevelSummary,
    Percentiles,
    RepeatStats,
    ScenarioSummary,
    Series,
    SeriesPoint,
)

_MIN = 1e-4  # seconds; anything faster lands in the first bucket
_MAX_DISTINCT = 32  # prompt_tokens values kept per repeat key
_MAX_MESSAGES = 3  # distinct messages kept per (scenario, status)
_MAX_ERROR_KEYS = 200
# A request still in flight when the drain after the planned end runs out is not the server's timeout if it
# has been in flight no longer than this many times the slowest answer of the level: a busy server is slow, not
# failing. Longer (a stall beside fast answers), or with no answer at all in the level, it is a timeout.
UNFINISHED_FACTOR = 3.0


class LogHistogram:
    """Counts in geometric buckets of ratio `growth`; percentiles within ±(growth-1)/2 of the truth."""

    __slots__ = ("_counts", "_log_growth", "count", "growth", "max", "min", "total")

    def __init__(self, growth: float = 1.04) -> None:
        self.growth = growth
        self._log_growth = math.log(growth)
        self._counts: dict[int, int] = {}  # sparse: a run touches few buckets
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = 0.0

    def add(self, value: float) -> None:
        index = 0 if value <= _MIN else int(math.log(value / _MIN) / self._log_growth) + 1
        self._counts[index] = self._counts.get(index, 0) + 1
        self.count += 1
        self.total += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def merge(self, other: LogHistogram) -> None:
        for index, n in other._counts.items():
            self._counts[index] = self._counts.get(index, 0) + n
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def percentile(self, q: float) -> float | None:
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for index in sorted(self._counts):
            seen += self._counts[index]
            if seen >= rank:
                if index == 0:
                    return min(self.max, _MIN)
                # the geometric middle of the bucket, clamped to what was really seen
                value = _MIN * self.growth ** (index - 0.5)
                return min(max(value, self.min), self.max)
        return self.max

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


def status_class(outcome: Outcome) -> str:
    if outcome.ok:
        return "2xx"
    if outcome.status is not None and 400 <= outcome.status < 500:
        return "4xx"
    if outcome.status is not None and outcome.status >= 500:
        return "5xx"
    return "error"  # no usable HTTP answer: timeout, reset, bad stream, refused...


@dataclass
class Bucket:
    """One slice of the time axis."""

    count: int = 0
    classes: Counter = field(default_factory=Counter)
    latency: LogHistogram = field(default_factory=lambda: LogHistogram(growth=1.2))
    inflight_max: int = 0
    findings: Counter = field(default_factory=Counter)
    health_failures: int = 0

    def merge(self, other: Bucket) -> None:
        self.count += other.count
        self.classes.update(other.classes)
        self.latency.merge(other.latency)
        self.inflight_max = max(self.inflight_max, other.inflight_max)
        self.findings.update(other.findings)
        self.health_failures += other.health_failures


class TimeSeries:
    """Buckets over the run's time axis; the width doubles instead of the list growing past `max_buckets`."""

    def __init__(self, width: float = 1.0, max_buckets: int = 600) -> None:
        self.width = width
        self.max_buckets = max_buckets
        self.buckets: list[Bucket] = []

    def at(self, t: float) -> Bucket:
        index = max(0, int(t / self.width))
        while index >= self.max_buckets:
            self._coarsen()
            index = max(0, int(t / self.width))
        while len(self.buckets) <= index:
            self.buckets.append(Bucket())
        return self.buckets[index]

    def _coarsen(self) -> None:
        merged = []
        for i in range(0, len(self.buckets), 2):
            pair = self.buckets[i]
            if i + 1 < len(self.buckets):
                pair.merge(self.buckets[i + 1])
            merged.append(pair)
        self.buckets = merged
        self.width *= 2

    def summary(self) -> Series:
        return Series(
            self.width,
            tuple(
                SeriesPoint(
                    t=round(i * self.width, 3),
                    count=b.count,
                    classes={k: b.classes[k] for k in STATUS_CLASSES if b.classes[k]},
                    p50=_r(b.latency.percentile(50)),
                    p95=_r(b.latency.percentile(95)),
                    max=_r(b.latency.max if b.latency.count else None),
                    inflight_max=b.inflight_max,
                    findings=dict(b.findings),
                    health_failures=b.health_failures,
                )
                for i, b in enumerate(self.buckets)
            ),
        )


@dataclass
class _ScenarioTally:
    count: int = 0
    ok: int = 0
    statuses: Counter = field(default_factory=Counter)
    latency: LogHistogram = field(default_factory=LogHistogram)
    ttft: LogHistogram = field(default_factory=LogHistogram)
    completion_tokens: int = 0

    def summary(self, elapsed: float) -> ScenarioSummary:
        return ScenarioSummary(
            count=self.count,
            ok=self.ok,
            statuses=dict(sorted(self.statuses.items())),
            latency=_percentiles(self.latency),
            ttft=_percentiles(self.ttft) if self.ttft.count else None,
            completion_tokens=self.completion_tokens,
            output_tokens_per_s=round(self.completion_tokens / elapsed, 2) if elapsed > 0 else None,
        )


@dataclass
class _ErrorTally:
    scenario: str
    label: str
    fault: Fault = Fault.SERVER
    mismatch: MismatchKind | None = None
    count: int = 0
    first_t: float = 0.0
    messages: list[str] = field(default_factory=list)

    def summary(self) -> ErrorGroup:
        return ErrorGroup(self.scenario, self.label, self.fault, self.mismatch, self.count, self.first_t,
                          tuple(self.messages))


@dataclass
class _RepeatTally:
    reference: Reference | None = None
    values: Counter = field(default_factory=Counter)
    first_seen: dict[int, float] = field(default_factory=dict)
    without_usage: int = 0
    baseline: tuple[tuple[float, ...], ...] | None = None  # the reference's vectors, else the first seen
    vectors_compared: int = 0
    vectors_differing: int = 0
    vector_max_distance: float | None = None

    def __post_init__(self) -> None:
        if self.reference is not None and self.reference.failed is None:
            self.baseline = self.reference.vectors

    def vectors(self, vectors: tuple[tuple[float, ...], ...]) -> None:
        if self.baseline is None:
            self.baseline = vectors  # no reference: the first answer under load is what the others must equal
            return
        far = distance(vectors, self.baseline)
        self.vectors_compared += 1
        self.vectors_differing += far > VECTOR_TOLERANCE
        self.vector_max_distance = max(self.vector_max_distance or 0.0, far)

    def summary(self) -> RepeatStats:
        reference = self.reference.prompt_tokens if self.reference is not None and self.reference.usable else None
        worst = self.vector_max_distance
        return RepeatStats(dict(sorted(self.values.items())), dict(sorted(self.first_seen.items())),
                           self.without_usage, reference, self.vectors_compared, self.vectors_differing,
                           None if worst is None else (worst if math.isinf(worst) else round(worst, 6)))


class LoadMetrics:
    """Everything the verdict and the report need, aggregated as outcomes arrive."""

    def __init__(self, scenarios: list[str], references: dict[str, Reference] | None = None) -> None:
        # the serial reference of each repeat key (load.reference); filled before the load starts
        self.references: dict[str, Reference] = references if references is not None else {}
        self.empty_5xx = 0
        self.empty_5xx_bad_words = 0
        self.slowest_answer = 0.0  # seconds: the slowest request that got any HTTP answer in the level
        self.unfinished = 0  # requests cut by the end of the drain while no slower than answers (see above)
        self.scenarios: dict[str, _ScenarioTally] = {name: _ScenarioTally() for name in scenarios}
        self.overall = LogHistogram()
        self.series = TimeSeries()
        self.errors: dict[tuple[str, str, Fault], _ErrorTally] = {}
        self.errors_dropped = 0
        self.faults: Counter[Fault] = Counter()  # failed requests by whose fault
        self.tied_resets = 0  # resets right after an error answer: counted with that answer's fault
        self.retried = 0  # requests sent again once: the server had closed their keep-alive connection
        self._untied_error_answers: list[Fault] = []  # faults of error answers no reset was tied to yet
        self.repeats: dict[str, _RepeatTally] = {}
        self.inflight = 0
        self.requests = 0
        self.ok = 0
        self.first_refused: float | None = None
        self._recent: list[tuple[float, int]] = []  # (t, requests) every ~second, for the live rate

    def started(self, t: float) -> None:
        self.inflight += 1
        bucket = self.series.at(t)
        bucket.inflight_max = max(bucket.inflight_max, self.inflight)

    def cut_at_drain(self, in_flight: float) -> bool:
        """A request still in flight when the drain ran out, after `in_flight` seconds: True when it is counted
        as unfinished (neither answered nor failed), False when it must be counted as a timeout."""
        if not self.slowest_answer or in_flight > UNFINISHED_FACTOR * self.slowest_answer:
            return False
        self.inflight -= 1
        self.unfinished += 1
        return True

    def finished(self, outcome: Outcome) -> Outcome:
        """Count one answered (or failed) request; returns it as counted: a reset tied to an earlier error
        answer carries that answer's fault (the caller's outcome is left as it was)."""
        self.inflight -= 1
        if outcome.status is not None:
            self.slowest_answer = max(self.slowest_answer, outcome.latency)
        self.requests += 1
        self.retried += outcome.retried
        stats = self.scenarios.setdefault(outcome.scenario, _ScenarioTally())
        stats.count += 1
        label = outcome.label
        stats.statuses[label] += 1
        end = outcome.start + outcome.latency
        bucket = self.series.at(end)
        bucket.count += 1
        bucket.classes[status_class(outcome)] += 1
        bucket.latency.add(outcome.latency)
        if outcome.ok:
            self.ok += 1
            stats.ok += 1
            stats.latency.add(outcome.latency)
            self.overall.add(outcome.latency)
            if outcome.ttft is not None:
                stats.ttft.add(outcome.ttft)
            stats.completion_tokens += outcome.completion_tokens or 0
            if outcome.repeat_key is not None:
                self._repeat(outcome, end)
            return outcome
        return self._error(outcome, label, end)

    def _repeat(self, outcome: Outcome, t: float) -> None:
        key = outcome.repeat_key or ""
        stats = self.repeats.get(key)
        if stats is None:
            stats = self.repeats[key] = _RepeatTally(self.references.get(key))
        if outcome.vectors is not None:
            stats.vectors(outcome.vectors)
        value = outcome.prompt_tokens
        if value is None:
            stats.without_usage += 1
        elif value in stats.values or len(stats.values) < _MAX_DISTINCT:
            stats.values[value] += 1
            stats.first_seen.setdefault(value, round(t, 3))

    def _error(self, outcome: Outcome, label: str, t: float) -> Outcome:
        if outcome.error == "refused" and self.first_refused is None:
            self.first_refused = t
        if outcome.status is not None and outcome.status >= 500 and _empty(outcome.message):
            self.empty_5xx += 1
            self.empty_5xx_bad_words += outcome.bad_words
        fault = Fault(outcome.fault or Fault.SERVER)
        if outcome.status is not None:
            self._untied_error_answers.append(fault)
            del self._untied_error_answers[:-_MAX_ERROR_KEYS]
        elif outcome.error == "reset" and self._untied_error_answers:
            # A server that drops the connection after an exception (vLLM does, after a 400) resets the
            # next request sent on it: one failure, not two.
            fault = self._untied_error_answers.pop(0)
            outcome = replace(outcome, fault=fault)
            self.tied_resets += 1
        self.faults[fault] += 1
        mismatch = MismatchKind(outcome.mismatch) if outcome.mismatch else None
        key = (outcome.scenario, label, fault)
        group = self.errors.get(key)
        if group is None:
            if len(self.errors) >= _MAX_ERROR_KEYS:
                self.errors_dropped += 1
                return outcome
            group = self.errors[key] = _ErrorTally(outcome.scenario, label, fault, mismatch, first_t=round(t, 3))
        group.count += 1
        message = outcome.message or ""
        if message and message not in group.messages and len(group.messages) < _MAX_MESSAGES:
            group.messages.append(message)
        return outcome

    def finding(self, t: float, rule_id: str) -> None:
        self.series.at(t).findings[rule_id] += 1

    def health_failure(self, t: float) -> None:
        self.series.at(t).health_failures += 1

    def rate(self, now: float, window: float = 5.0) -> float:
        """Requests per second over the last `window` seconds (for the live display)."""
        self._recent.append((now, self.requests))
        while len(self._recent) > 2 and self._recent[1][0] < now - window:
            self._recent.pop(0)
        (t0, n0), (t1, n1) = self._recent[0], self._recent[-1]
        if t1 > t0:
            return (n1 - n0) / (t1 - t0)
        return n1 / now if now > 0 else 0.0  # the first sample: the average so far

    def summary(self, elapsed: float) -> LevelSummary:
        return LevelSummary(
            requests=self.requests,
            ok=self.ok,
            requests_per_s=round(self.requests / elapsed, 2) if elapsed > 0 else None,
            latency=_percentiles(self.overall),
            scenarios={name: s.summary(elapsed) for name, s in self.scenarios.items()},
            errors_by_fault=dict(sorted(self.faults.items())),
            tied_resets=self.tied_resets,
            retried=self.retried,
            error_groups=tuple(g.summary() for g in sorted(self.errors.values(), key=lambda g: -g.count)),
            error_groups_dropped=self.errors_dropped,
            repeats={key: r.summary() for key, r in sorted(self.repeats.items())},
            empty_5xx=self.empty_5xx,
            empty_5xx_bad_words=self.empty_5xx_bad_words,
            unfinished=self.unfinished,
            slowest_answer=round(self.slowest_answer, 3),
        )


def _empty(message: str | None) -> bool:
    """A message that says nothing: vLLM's `{"error": {"message": ""}}`, or an empty body."""
    return not message or message.strip() in ("", "(empty body)", "{}")


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 5)


def _percentiles(hist: LogHistogram) -> Percentiles:
    return Percentiles(
        p50=_r(hist.percentile(50)),
        p95=_r(hist.percentile(95)),
        p99=_r(hist.percentile(99)),
        mean=_r(hist.mean),
        max=_r(hist.max if hist.count else None),
    )
