"""The client's cost per extra fleet target: one event loop drives every target.

    python bench/fleet.py [--seconds 8] [--targets 1,2,4,8] [--check]

For each fleet size N, `run_fleet` loads N fake servers (tests/support/fakeserver.py, answering at once) at
concurrency 4 each for --seconds, in this process. It prints the client's CPU time per request and its peak
RSS against the one-target run measured in the same invocation (ratios, medians of --repeat runs): a
fleet of N should cost about the same CPU per request and a bounded amount of memory per target.
Goals (`--check` exits 1 when one is missed): CPU per request <= 1.5x the first size's at every size; RSS
growth <= 10 MB per target.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
from pathlib import Path

from goals import Goal, add_check, finish
from memory import rss_mb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from borrowguard.load.scenarios import ScenarioSettings
from borrowguard.verify.config import VerifyConfig
from borrowguard.verify.fleet import Replica, run_fleet
from support.fakeserver import FakeServer  # test scaffolding, not shipped

CPU_RATIO_GOAL = 1.5
RSS_MB_PER_TARGET_GOAL = 10.0


def one(n: int, seconds: float) -> tuple[float, int, float]:
    """(client CPU seconds per request, requests, RSS growth MB) for a fleet of n fake servers."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(FakeServer(faults=["ok"])) for _ in range(n)]
        targets = [Replica(f"t{i}", s.url) for i, s in enumerate(servers)]
        base = VerifyConfig(scenario=ScenarioSettings(mix={"text": 1.0, "tools": 1.0}), concurrency=4,
                            duration=seconds)
        rss0 = rss_mb()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        result = run_fleet(targets, base)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    requests = sum(r.levels[0].summary.requests for _, r in result.targets if r.levels)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return cpu / max(1, requests), requests, rss_mb() - rss0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--targets", default="1,2,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    add_check(parser)
    args = parser.parse_args()
    sizes = [int(x) for x in args.targets.split(",")]
    runs: dict[int, list[tuple[float, int, float]]] = {n: [] for n in sizes}
    for _ in range(args.repeat):  # interleaved: drift on a shared machine hits every size alike
        for n in sizes:
            runs[n].append(one(n, args.seconds))
    base = statistics.median(r[0] for r in runs[sizes[0]])
    print(f"fleet size | requests (median) | client CPU per request vs {sizes[0]} target(s) | RSS growth MB")
    worst_cpu, worst_rss = 0.0, float("-inf")
    for n in sizes:
        cpu = statistics.median(r[0] for r in runs[n]) / base
        rss = statistics.median(r[2] for r in runs[n])
        worst_cpu, worst_rss = max(worst_cpu, cpu), max(worst_rss, rss / n)
        print(f"{n:>10} | {statistics.median(r[1] for r in runs[n]):>17.0f} | {cpu:>10.2f}x | {rss:.1f}")
    goals = [
        Goal(f"CPU per request <= {CPU_RATIO_GOAL}x the {sizes[0]}-target run", worst_cpu <= CPU_RATIO_GOAL,
             f"worst {worst_cpu:.2f}x"),
        Goal(f"RSS growth <= {RSS_MB_PER_TARGET_GOAL:g} MB per target", worst_rss <= RSS_MB_PER_TARGET_GOAL,
             f"worst {worst_rss:.1f} MB per target"),
    ]
    return finish(goals, check=args.check)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
