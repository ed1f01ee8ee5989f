"""The open-file budget of a run, checked before anything starts: a run that would die half-way with "Too
many open files" (and lose its report) is refused up front, in one line, or given the room it needs.

    ensure_descriptors([config_a, config_b, ...])   # raises UserInputError, or raises the soft limit

Each target holds its load's connections (the pool is the concurrency plus a few), the preflight's and
watchers' connections, one descriptor per followed log file, two per log command (its output and its
watchdog pipe) and its records file. The soft limit (`ulimit -n`) is raised up to the hard one when that
is enough; otherwise the message says what the run needs and what to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from borrowguard.errors import UserInputError
from borrowguard.verify.wording import flag

__all__ = ["BASE_DESCRIPTORS", "DescriptorBudget", "descriptors_needed", "ensure_descriptors"]

BASE_DESCRIPTORS = 64
"""The process itself: interpreter, event loop, the bundled server's pipes, a margin."""
PER_TARGET = 12
"""Per target besides its load: the connector's spare connections, preflight probes, health, /metrics."""


class _Config(Protocol):
    @property
    def levels(self) -> list[int]: ...

    logs: list
    log_commands: list
    records: object


@dataclass(frozen=True)
class DescriptorBudget:
    """What a run needs, and the limits it runs under (`hard` None: unlimited)."""

    needed: int
    soft: int
    hard: int | None


def descriptors_needed(configs: Sequence[_Config]) -> int:
    """Open files the run can hold at once (its highest concurrency level, per target)."""
    total = BASE_DESCRIPTORS
    for config in configs:
        total += max(config.levels) + PER_TARGET + len(config.logs) + 2 * len(config.log_commands)
        total += 1 if config.records is not None else 0
    return total


def ensure_descriptors(configs: Sequence[_Config]) -> DescriptorBudget:
    """Raise the soft open-file limit to what the run needs when the hard limit allows; UserInputError (one
    line: what is needed, what the limit is, what to change) when it does not."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to check
        return DescriptorBudget(descriptors_needed(configs), -1, None)
    needed = descriptors_needed(configs)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    budget = DescriptorBudget(needed, soft, None if hard == unlimited else hard)
    if soft == unlimited or needed <= soft:
        return budget
    if hard == unlimited or needed <= hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
            return DescriptorBudget(needed, needed, budget.hard)
        except (ValueError, OSError):
            pass  # not allowed here: refuse below
    targets = len(configs)
    levels = max(max(c.levels) for c in configs) if configs else 0
    raise UserInputError(
        f"this run needs about {needed} open files ({targets} target(s) at concurrency up to {levels}); "
        f"the limit is {soft} (hard {hard if hard != unlimited else 'unlimited'}): raise it "
        f"(ulimit -n {needed}), or use fewer targets or a lower {flag('concurrency')}"
    )
