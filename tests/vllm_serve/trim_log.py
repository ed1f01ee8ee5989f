#!/usr/bin/env python3
"""Trim a real `vllm serve` log to a fixture of bounded size, keeping what a log scanner must see.

    python tests/vllm_serve/trim_log.py SRC DST --comment "how it was produced" [--max-bytes 200000]

Kept, in the original order: the startup (through "Application startup complete." and a few lines after),
MIDDLE lines from the middle of the log, the periodic stats lines, a spread of error events — each a 500/400 access line with the whole traceback
uvicorn prints after it ("ERROR:    Exception in ASGI application"), the first of each distinct final
exception line, then evenly spaced others — and the end (shutdown). Every gap is one line
"# [trim_log: N lines omitted]"; the first line is "# " + the comment. Nothing inside a kept line changes.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

PREFIX = re.compile(r"^\((?:APIServer|EngineCore[\w]*) pid=\d+\) ")
ACCESS_ERROR = re.compile(r'" (?:4\d\d|5\d\d) ')
HEAD_AFTER_STARTUP = 12
TAIL = 40
MIDDLE = 120


def content(line: str) -> str:
    return PREFIX.sub("", line, count=1)


def event_end(lines: list[str], i: int) -> int:
    """Index of the last line of the traceback that uvicorn logs after the access line at i (or i)."""
    j = i + 1
    if j >= len(lines) or "Exception in ASGI application" not in lines[j]:
        return i
    in_tb = False
    end = j
    for k in range(j + 1, min(len(lines), j + 400)):
        c = content(lines[k])
        if c.startswith("Traceback (most recent call last)") or c.startswith(" ") or not c.strip():
            in_tb = True
            end = k
            continue
        if c.startswith(("The above exception", "During handling of the above")):
            end = k
            continue
        if in_tb:  # the final "SomeError: message" line
            return k
        break
    return end


def trim(lines: list[str], max_bytes: int) -> list[tuple[int, int]]:
    n = len(lines)
    startup = next((i for i, line in enumerate(lines) if "Application startup complete." in line), 60)
    keep = [(0, min(n, startup + HEAD_AFTER_STARTUP)), (max(0, n - TAIL), n),
            (max(0, n // 2 - MIDDLE // 2), min(n, n // 2 + MIDDLE // 2))]  # ordinary traffic
    keep += [(i, i + 1) for i, line in enumerate(lines) if "Avg prompt throughput" in line]
    events = []
    for i, line in enumerate(lines):
        if ACCESS_ERROR.search(line) and "HTTP/1.1" in line:
            end = event_end(lines, i)
            events.append((i, end, content(lines[end]).strip() if end > i else "no traceback: " + content(line)))
    firsts, seen = [], set()
    for ev in events:
        kind = ev[2].split(":")[0] + ("" if ev[1] > ev[0] else " " + ev[2].split('"')[1].split()[0])
        if kind not in seen:
            seen.add(kind)
            firsts.append(ev)
    budget = max_bytes - sum(len(lines[k]) + 1 for a, b in keep for k in range(a, b)) - 2000
    chosen = []
    for ev in firsts:
        size = sum(len(lines[k]) + 1 for k in range(ev[0] - 2, ev[1] + 3))
        if size < budget:
            chosen.append(ev)
            budget -= size
    rest = [ev for ev in events if ev not in chosen]
    if rest and budget > 0:
        avg = sum(sum(len(lines[k]) + 1 for k in range(a - 2, b + 3)) for a, b, _ in rest) / len(rest)
        count = min(len(rest), int(budget // max(avg, 1)))
        if count:
            step = len(rest) / count
            chosen += [rest[int(i * step)] for i in range(count)]
    keep += [(max(0, a - 2), min(n, b + 3)) for a, b, _ in chosen]
    keep.sort()
    merged: list[tuple[int, int]] = []
    for a, b in keep:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--comment", required=True)
    ap.add_argument("--max-bytes", type=int, default=200_000)
    args = ap.parse_args()
    lines = args.src.read_text("utf-8", "replace").splitlines()
    out = ["# " + args.comment.replace("\n", " ")]
    pos = 0
    for a, b in trim(lines, args.max_bytes - len(out[0]) - 1):
        if a > pos:
            out.append(f"# [trim_log: {a - pos} lines omitted]")
        out.extend(lines[a:b])
        pos = b
    if pos < len(lines):
        out.append(f"# [trim_log: {len(lines) - pos} lines omitted]")
    text = "\n".join(out) + "\n"
    args.dst.parent.mkdir(parents=True, exist_ok=True)
    args.dst.write_text(text, encoding="utf-8")
    print(f"{args.dst}: {len(text.encode())} bytes, {len(out)} lines (of {len(lines)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
