"""The hammer: many threads run the same calls at once, and every result is checked against the reference.

    result = hammer(tok, calls, expected, threads=8, seconds=2)
    result.exceptions, result.wrong_outputs        # {"Already borrowed": 812}, {"pair": 31, ...}
    result.clean, result.concurrent                # no failure in > 0 calls; calls overlapped in time
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from borrowguard.race.calls import Call, short
from borrowguard.race.compare import Mismatch, Raised, run_one

__all__ = ["HammerResult", "hammer"]


@dataclass
class HammerResult:
    """What a hammer run saw. `exceptions` counts unexpected exceptions by kind, `wrong_outputs` by shape;
    `overlapping` counts calls that started while another thread's call was still in flight."""

    threads: int
    calls: int = 0
    overlapping: int = 0
    seconds: float = 0.0
    exceptions: dict[str, int] = field(default_factory=dict)
    wrong_outputs: dict[str, int] = field(default_factory=dict)
    calls_by_shape: dict[str, int] = field(default_factory=dict)
    examples: list[Mismatch] = field(default_factory=list)

    @property
    def total_exceptions(self) -> int:
        return sum(self.exceptions.values())

    @property
    def total_wrong(self) -> int:
        return sum(self.wrong_outputs.values())

    @property
    def clean(self) -> bool:
        """True when calls ran and every one matched the serial reference (no call proves nothing)."""
        return self.calls > 0 and self.total_exceptions == 0 and self.total_wrong == 0

    @property
    def concurrent(self) -> bool:
        """True when at least one call overlapped another thread's: a clean run without it proves nothing
        about concurrency."""
        return self.overlapping > 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data


class _ThreadState:
    # Each worker counts into its own state: a shared lock per call would serialise the very race we want.
    __slots__ = ("busy", "by_shape", "calls", "examples", "exceptions", "n_exc", "n_wrong", "overlapping", "wrong")

    def __init__(self) -> None:
        self.busy = False  # inside a call; read by the other workers without a lock (a plain bool)
        self.calls = 0
        self.overlapping = 0
        self.n_exc = 0
        self.n_wrong = 0
        self.exceptions: Counter[str] = Counter()
        self.wrong: Counter[str] = Counter()
        self.by_shape: Counter[str] = Counter()
        self.examples: list[Mismatch] = []


@dataclass
class _Hammer:
    """One run: its threads, their states and the limits they stop at."""

    obj: Any
    calls: Sequence[Call]
    reference: Sequence[Any]
    threads: int
    seconds: float | None
    iterations: int | None
    min_calls: int
    stop: threading.Event
    seed: int
    max_examples: int
    start: float = 0.0
    deadline: float = 0.0
    states: list[_ThreadState] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.states = [_ThreadState() for _ in range(self.threads)]
        self.barrier = threading.Barrier(self.threads + 1)

    def worker(self, index: int) -> None:
        state = self.states[index]
        rng = random.Random(f"{self.seed}:{index}")
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return
        while not self.stop.is_set():
            if self.iterations is not None and state.calls >= self.iterations:
                break
            if self.seconds is not None and time.monotonic() >= self.deadline and self.made() >= self.min_calls:
                break
            i = rng.randrange(len(self.calls))
            self.check(state, self.calls[i], self.reference[i])

    def check(self, state: _ThreadState, call: Call, expected: Any) -> None:
        state.busy = True
        if any(other.busy for other in self.states if other is not state):
            state.overlapping += 1
        try:
            got = run_one(self.obj, call)
        finally:
            state.busy = False
        state.calls += 1
        state.by_shape[call.shape] += 1
        if got == expected:
            return
        if isinstance(got, Raised) and not isinstance(expected, Raised):
            state.exceptions[got.kind] += 1
            state.n_exc += 1
        else:
            state.wrong[call.shape] += 1
            state.n_wrong += 1
        if len(state.examples) < self.max_examples:
            state.examples.append(Mismatch(call.shape, call.describe(), short(expected, 200), short(got, 200)))

    def made(self) -> int:
        """Calls made so far by every worker (plain ints, read without a lock)."""
        return sum(s.calls for s in self.states)

    def release(self) -> None:
        """Start every worker at once; the clock starts here."""
        self.start = time.monotonic()
        self.deadline = self.start + (self.seconds if self.seconds is not None else 0.0)
        self.barrier.wait()

    def progress(self) -> HammerResult:
        # Reading other threads' Counters while they change is unsafe; the totals are plain ints.
        result = HammerResult(threads=self.threads, seconds=time.monotonic() - self.start)
        result.calls = sum(s.calls for s in self.states)
        result.overlapping = sum(s.overlapping for s in self.states)
        n_exc = sum(s.n_exc for s in self.states)
        n_wrong = sum(s.n_wrong for s in self.states)
        result.exceptions = {"total": n_exc} if n_exc else {}
        result.wrong_outputs = {"total": n_wrong} if n_wrong else {}
        return result

    def final(self) -> HammerResult:
        result = HammerResult(threads=self.threads, seconds=time.monotonic() - self.start)
        exc: Counter[str] = Counter()
        wrong: Counter[str] = Counter()
        shapes: Counter[str] = Counter()
        for s in self.states:
            result.calls += s.calls
            result.overlapping += s.overlapping
            exc.update(s.exceptions)
            wrong.update(s.wrong)
            shapes.update(s.by_shape)
            result.examples.extend(s.examples)
        result.exceptions = dict(exc.most_common())
        result.wrong_outputs = dict(wrong.most_common())
        result.calls_by_shape = dict(shapes.most_common())
        result.examples = result.examples[: self.max_examples]
        return result


def hammer(
    obj: Any,
    calls: Sequence[Call],
    reference: Sequence[Any],
    *,
    threads: int = 16,
    seconds: float | None = None,
    iterations: int | None = None,
    min_calls: int = 0,
    stop: threading.Event | None = None,
    on_progress: Callable[[HammerResult], None] | None = None,
    seed: int = 0,
    max_examples: int = 5,
    progress_interval: float = 0.1,
) -> HammerResult:
    """Run `calls` from `threads` threads at once and compare each result with `reference`.

    Threads start together (barrier) and draw calls at random. Each stops after `iterations` calls of
    its own, after `seconds`, or when `stop` is set, whichever comes first (with none given: one pass,
    `len(calls)` calls per thread). With `seconds`, workers keep going past the deadline until `min_calls`
    calls were made in all: a slow or busy machine gets more time, never a weaker check. `on_progress`
    gets a snapshot every `progress_interval` seconds, from the calling thread.

    An exception where the reference had none counts in `exceptions` by kind; any other difference,
    including a different exception, counts in `wrong_outputs` by call shape.
    """
    if len(calls) != len(reference) or not calls:
        raise ValueError("calls and reference must be non-empty and of the same length")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    if seconds is None and iterations is None and stop is None:
        iterations = len(calls)
    run = _Hammer(obj, calls, reference, threads, seconds, iterations, min_calls, stop or threading.Event(), seed,
                  max_examples)
    workers = [threading.Thread(target=run.worker, args=(i,), daemon=True) for i in range(threads)]
    for t in workers:
        t.start()
    run.release()
    try:
        while any(t.is_alive() for t in workers):
            workers[0].join(progress_interval) if workers[0].is_alive() else time.sleep(progress_interval)
            if on_progress is not None:
                on_progress(run.progress())
    finally:
        run.stop.set()
        for t in workers:
            t.join()
    return run.final()
