"""How much of what people actually post does `borrowguard scan` recognise, and does it ever cry wolf?

Scans every excerpt of tests/fixtures/logs/real-world/ (verbatim lines from public issue threads, each file
citing its thread and declaring what it must and must not produce; see tests/scan/test_scan_recall.py) on
both read paths and prints precision and recall overall and per expected problem, with the confidence
each finding got. Goals: precision 1.0, recall >= 0.9.

    python bench/scan_recall.py
    python bench/scan_recall.py --verbose      # every file's expected and found ids
    python bench/scan_recall.py --set held-out-5    # a set collected after the rules of its time, labelled
                                                    # before any scan: every set, its folder and its figures
                                                    # as collected and now are in docs/scan-recall.md
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "scan" / "test_scan_recall.py"
sys.path.insert(0, str(ROOT / "tests"))  # the harness reads the excerpts with tests/support/realworld.py
from support.realworld import COLLECTED  # noqa: E402

SETS = {"first": "real-world", **{s.name: s.directory for s in COLLECTED}}
GOALS = {"first": (1.0, 0.9), **{s.name: (0.95, 0.9) for s in COLLECTED}}


def load_harness():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("scan_recall", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--set", choices=sorted(SETS), default="first", help="which excerpts (default: first)")
    args = ap.parse_args()
    h = load_harness()
    cases = h.cases(SETS[args.set])
    goal_precision, goal_recall = GOALS[args.set]
    tp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    confidence_agrees = disagree_paths = 0
    for case in cases:
        bulk, line = h.found(h.bulk(case)), h.found(h.line_by_line(case))
        disagree_paths += bulk != line
        for problem in case.expect:
            if problem in bulk:
                tp[problem] += 1
                confidence_agrees += bulk[problem] == case.expect[problem]
            else:
                fn[problem] += 1
        for problem in set(bulk) - set(case.expect):
            fp[problem] += 1
        if args.verbose:
            print(f"{case.path.parent.name}/{case.path.name}: expected {case.expect} found {bulk}")
    positives = sum(1 for c in cases if c.expect)
    print(f"{len(cases)} real-world excerpts ({args.set}): {positives} positive, {len(cases) - positives} near-miss")
    for problem in sorted(set(tp) | set(fn) | set(fp)):
        print(f"  {problem:28} found {tp[problem]}/{tp[problem] + fn[problem]}, false {fp[problem]}")
    total_tp, total_fn, total_fp = sum(tp.values()), sum(fn.values()), sum(fp.values())
    precision = total_tp / (total_tp + total_fp) if total_tp + total_fp else 1.0
    recall = total_tp / (total_tp + total_fn) if total_tp + total_fn else 1.0
    print(f"precision {precision:.2f} (goal {goal_precision:.2f}), recall {recall:.2f} (goal >= {goal_recall:.2f}); "
          f"confidence as labelled for {confidence_agrees}/{total_tp}; read paths disagree on {disagree_paths} file(s)")
    return 0 if precision >= goal_precision and recall >= goal_recall and not disagree_paths else 1


if __name__ == "__main__":
    sys.exit(main())
