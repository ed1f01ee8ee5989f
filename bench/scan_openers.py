"""Does a hostile log of traceback openers cost `borrowguard scan` much more than an ordinary log?

"Traceback (most recent call last):" is an anchor (a traceback is read whole from its first line), so a log
made of nothing else makes the bulk reader parse every line. Times, in the same run, interleaved, medians of
--runs, on page-cached files of the same size (--size-mb, default 8):

  ordinary  bench/scan.py's generated vLLM-style log (healthy lines, a failure every 5000 lines)
  openers   nothing but "Traceback (most recent call last):" lines (bare, and with vLLM's prefix)
  varied    the same with vLLM's prefix, every line's timestamp different (no two lines alike)

and prints seconds, MB/s and the cost per MB against the ordinary log. Goal: at most 3x for both.

    python bench/scan_openers.py
    python bench/scan_openers.py --check     # exit 1 when the ratio is above the goal
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from borrowguard.scan import Scanner
from scan import generate  # bench/scan.py, its neighbour (a script's folder is first on sys.path)

GOAL = 3.0
OPENERS = (
    b"Traceback (most recent call last):\n",
    b"(APIServer pid=7) ERROR 07-07 20:12:45 [serving_chat.py:240] Traceback (most recent call last):\n",
)


def scan_seconds(path: Path) -> float:
    start = time.perf_counter()
    sc = Scanner()
    with path.open("rb") as fh:
        sc.scan_stream(fh, path.name)
    sc.result()
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--check", action="store_true", help=f"exit 1 when openers/ordinary is above {GOAL}")
    args = ap.parse_args()
    size = args.size_mb << 20
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: Path(tmp) / f"{name}.log" for name in ("ordinary", "openers", "varied")}
        generate(paths["ordinary"], size, 5000)
        with paths["openers"].open("wb") as fh:
            written = 0
            while written < size:
                for line in OPENERS:
                    fh.write(line * 1000)
                    written += len(line) * 1000
        with paths["varied"].open("wb") as fh:
            written = i = 0
            while written < size:
                i += 1
                line = (f"(APIServer pid=7) ERROR 07-07 20:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000000:06d} "
                        "[serving_chat.py:240] Traceback (most recent call last):\n").encode()
                fh.write(line)
                written += len(line)
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.runs):
            for name, path in paths.items():
                times[name].append(scan_seconds(path))
        med = {k: statistics.median(v) for k, v in times.items()}
        mb = {name: path.stat().st_size / 1e6 for name, path in paths.items()}
    per_mb = {name: med[name] / mb[name] for name in paths}
    worst = 0.0
    for name in paths:
        ratio = per_mb[name] / per_mb["ordinary"]
        worst = max(worst, ratio)
        print(f"{name:9} {mb[name]:6.1f} MB  {med[name]:6.2f} s  {mb[name] / med[name]:7.1f} MB/s  {ratio:5.1f}x ordinary")
    print(f"worst: {worst:.1f}x an ordinary log per MB (goal <= {GOAL:.0f}x)")
    return 1 if args.check and worst > GOAL else 0


if __name__ == "__main__":
    sys.exit(main())
