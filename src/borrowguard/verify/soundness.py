"""What a PASS may claim: that tokenizing requests really ran concurrently, and every asked-for check ran.

Pure functions over plain counts, called by the verdict. A PASS names the scenarios (and so the endpoints)
it exercised; a run that exercised none, or in which a check the user asked for (`--log`, `--log-cmd`)
could not run, is INCOMPLETE, never PASS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from borrowguard.verify.wording import LOG_FLAGS

MIN_CONCURRENCY = 2  # one request at a time races nothing
MIN_OK = 2  # at least two answers of a scenario at such a level: it ran beside the others


@dataclass(frozen=True)
class Exercise:
    """What ran: per scenario the answers that show its requests were tokenized (the 2xx, and forced tool
    calls our max_tokens cut) at levels of concurrency >= MIN_CONCURRENCY."""

    ok: Mapping[str, int]

    @property
    def scenarios(self) -> list[str]:
        return sorted(name for name, n in self.ok.items() if n >= MIN_OK)

    def describe(self) -> str:
        return ", ".join(f"{name} ({self.ok[name]} answered)" for name in self.scenarios)


def exercise(levels: Iterable[tuple[int, Mapping[str, int]]]) -> Exercise:
    """`levels`: (concurrency, {scenario: successful answers}) per level."""
    ok: dict[str, int] = {}
    for concurrency, counts in levels:
        if concurrency < MIN_CONCURRENCY:
            continue
        for name, n in counts.items():
            ok[name] = ok.get(name, 0) + n
    return Exercise(ok)


def incomplete_because(ran: Exercise, served: Iterable[str], *, log_asked: bool, log_ran: bool,
                       log_detail: str = "") -> list[str]:
    """Why a run without failures still cannot PASS (empty: it can)."""
    why = []
    if not ran.scenarios:
        paths = sorted(served)
        said = ", ".join(paths) if paths else "none of the endpoints verify knows"
        why.append("no tokenizing request succeeded under concurrent load, so nothing was tested; "
                   f"the server serves: {said}")
    if log_asked and not log_ran:
        why.append(f"the log check asked for ({LOG_FLAGS}) could not run"
                   + (f": {log_detail}" if log_detail else ""))
    return why
