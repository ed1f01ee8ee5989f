"""How much of what people actually post does `borrowguard scan` recognise, and does it ever cry wolf?

Scans every excerpt of tests/fixtures/logs/real-world/ (verbatim lines from public issue threads, each file
citing its thread and declaring what it must and must not produce; see tests/scan/test_scan_recall.py) on
both read paths and prints precision and recall overall and per expected problem, with the confidence
each finding got. Goals: precision 1.0, recall >= 0.9.

    python bench/scan_recall.py
    python bench/scan_recall.py --verbose      # every file's expected and found ids
    python bench/scan_recall.py --set after-rules   # tests/fixtures/logs/real-world-2/: the excerpts
                                                    # collected after the rules were written (goals 0.95 / 0.9)
    python bench/scan_recall.py --set held-out      # tests/fixtures/logs/real-world-3/: collected after the
                                                    # rules of issue 22 were written, labelled before any scan
    python bench/scan_recall.py --set held-out-2    # tests/fixtures/logs/real-world-4/: collected after
                                                    # real-world-3's lessons were learned, labelled before any scan
    python bench/scan_recall.py --set held-out-3    # tests/fixtures/logs/real-world-5/: collected after
                                                    # real-world-4's lessons were generalized, labelled before any scan
    python bench/scan_recall.py --set held-out-4    # tests/fixtures/logs/real-world-6/: collected after the
                                                    # rules for the classes (7add21a), labelled before any scan
    python bench/scan_recall.py --set held-out-5    # tests/fixtures/logs/real-world-7/: collected after the
                                                    # rules for the classes (47a7505), labelled before any scan
    python bench/scan_recall.py --set held-out-6    # tests/fixtures/logs/real-world-8/: collected after the
                                                    # rules for the classes (1a09f0f), labelled before any scan
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
SETS = {"first": "real-world", "after-rules": "real-world-2", "held-out": "real-world-3", "held-out-2": "real-world-4",
        "held-out-3": "real-world-5", "held-out-4": "real-world-6", "held-out-5": "real-world-7",
        "held-out-6": "real-world-8"}
GOALS = {"first": (1.0, 0.9), "after-rules": (0.95, 0.9), "held-out": (0.95, 0.9), "held-out-2": (0.95, 0.9),
         "held-out-3": (0.95, 0.9), "held-out-4": (0.95, 0.9), "held-out-5": (0.95, 0.9),
         "held-out-6": (0.95, 0.9)}


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
