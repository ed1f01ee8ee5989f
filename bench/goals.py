"""A bench's goals and its exit status, the same for every bench script.

    goals = [Goal("guard on / off >= 0.8", ratio >= 0.8, f"{ratio:.2f}")]
    return finish(goals, check=args.check)       # prints each goal; 1 with --check when one is missed

Without `--check` a bench reports and exits 0 (a measurement, not a test); with it, a missed goal, or a
goal that could not be measured, exits 1, so CI or a person can gate on it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Goal", "add_check", "finish"]


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, whether the figure measured in this run meets it, and that figure."""

    name: str
    met: bool
    figure: str


def add_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a goal is missed or could not be measured (default: report, exit 0)")


def finish(goals: Sequence[Goal], *, check: bool) -> int:
    """Print every goal with its figure; the exit status: 1 under `check` when a goal is missed, else 0."""
    for goal in goals:
        print(f"goal {goal.name}: {goal.figure} — {'met' if goal.met else 'NOT met'}")
    missed = [goal.name for goal in goals if not goal.met]
    if not goals:
        missed = ["(no goal was measured)"]
    if check and missed:
        print(f"check failed: {len(missed)} goal(s) missed: {'; '.join(missed)}", file=sys.stderr)
        return 1
    return 0
