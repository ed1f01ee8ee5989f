"""The bulk reader's helpers: blocks of whole lines, and which lines of a block contain an anchor.

Substring search over a block of megabytes runs at memory speed; running regexes over every line does not.
So the scanner only parses lines that contain one of the signatures' anchors (see knowledge.signatures).
The stdlib has no multi-pattern search, so that is one pass per anchor; with the optional ahocorasick-rs
package (`pip install 'borrowguard[scan]'`) it is one Aho-Corasick pass for all of them. With the knowledge
base's ~1,500 anchors that is some fifty times faster (bench/scan.py with and without --no-accel: 0.62x and
0.01x grep's rate on the same 53 MB log). The lines found are the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from borrowguard.scan.normalize import ELLIPSIS_BYTES, HEAD, MAX_LINE, normalize, without_raw_codes
from borrowguard.scan.tracebacks import MAX_WINDOW_LINES, Kind, classify

try:
    import ahocorasick_rs as _aho
except ImportError:  # optional: `pip install 'borrowguard[scan]'`
    _aho = None


def accelerated() -> bool:
    """Whether the anchors can be searched in one Aho-Corasick pass (ahocorasick-rs is installed)."""
    return _aho is not None


SLOW_LINES = 100_000
"""Lines past which a scan without ahocorasick-rs says how to make it faster (about 15 s of reading)."""


def speed_note(lines: int) -> str | None:
    """What to tell someone who just read `lines` lines one anchor at a time; None when nothing."""
    if accelerated() or lines < SLOW_LINES:
        return None
    return (f"read {lines:,} lines one anchor at a time: pip install 'borrowguard[scan]' adds a multi-pattern "
            "matcher that reads big logs about fifty times faster (the same findings)")


BLOCK = 4 << 20
AC_SLICE = 256 << 10
MAX_INTERLEAVED = 16
"""Lines of other processes that the bulk reader looks past for the start of a traceback."""
TS_REACH = 500
"""A line without a timestamp (a traceback line) takes the last one seen at most this many lines above."""


@dataclass(frozen=True)
class BlockScan:
    """What the anchor search found in one block; the block itself is kept only when it has candidates."""

    lines: int
    """-1 when there are candidates: the scanner counts the block's lines while reading it."""
    candidates: list[int]
    """Offsets in `block` of the starts of the lines to parse."""
    tail_timestamp: tuple[str, int] | None
    """The nearest timestamp above the block's end and how many lines above it is (for the next block)."""
    block: bytes
    """The block itself: a traceback still open from the previous block is read on into it."""


class AnchorSearch:
    """Where a block contains any of the anchors."""

    def __init__(self, anchors: tuple[bytes, ...], *, accelerate: bool = True) -> None:
        self.anchors = anchors
        self.accelerated = bool(accelerate and _aho is not None and anchors)
        self._automaton = (
            # leftmost-first lets the automaton skip ahead with its SIMD prefilter: ten times faster than
            # "standard" matching, and one match per anchor occurrence is all a line needs
            _aho.BytesAhoCorasick(  # type: ignore[union-attr]
                list(anchors), matchkind=_aho.MATCHKIND_LEFTMOST_FIRST, implementation=_aho.Implementation.DFA
            )
            if self.accelerated
            else None
        )

    def positions(self, block: bytes) -> Iterator[int]:
        """Offsets of anchor occurrences: at least one in every line that contains an anchor."""
        if self._automaton is not None:
            # The automaton returns every match as a list: in slices, so that a hostile block made of
            # anchors costs a bounded list at a time. Slices overlap by the longest anchor.
            view = memoryview(block)
            overlap = max(len(a) for a in self.anchors) - 1
            for begin in range(0, len(block), AC_SLICE):
                end = begin + AC_SLICE
                for _, start, _ in self._automaton.find_matches_as_indexes(view[begin : end + overlap]):
                    if start < AC_SLICE:
                        yield begin + start
            return
        find = block.find
        for anchor in self.anchors:
            i = find(anchor)
            while i != -1:
                yield i
                nl = find(b"\n", i)
                if nl == -1:
                    break
                i = find(anchor, nl + 1)


class AnchorSets:
    """Which of several anchor sets a line contains any anchor of: the signatures worth trying on a candidate
    line, in their order. Trying each signature's anchors in turn costs a substring search per anchor and
    line (thousands); one overlapping Aho-Corasick pass over the line finds every anchor it holds at once."""

    def __init__(self, sets: Sequence[Sequence[str]], *, accelerate: bool = True) -> None:
        self.sets = tuple(tuple(s) for s in sets)
        owners: dict[str, list[int]] = {}
        for i, anchors in enumerate(self.sets):
            for anchor in dict.fromkeys(anchors):
                owners.setdefault(anchor, []).append(i)
        self._owners = tuple(tuple(v) for v in owners.values())
        self._automaton = (
            # standard matching, overlapping: every anchor a line holds, also one inside another
            _aho.AhoCorasick(list(owners), matchkind=_aho.MATCHKIND_STANDARD)  # type: ignore[union-attr]
            if accelerate and _aho is not None and owners
            else None
        )

    def holding(self, line: str) -> list[int]:
        """The indices of the sets with an anchor in `line`, ascending."""
        if self._automaton is None:
            return [i for i, anchors in enumerate(self.sets) if any(a in line for a in anchors)]
        found: set[int] = set()
        for pattern in {p for p, _, _ in self._automaton.find_matches_as_indexes(line, overlapping=True)}:
            found.update(self._owners[pattern])
        return sorted(found)


def analyse(block: bytes, anchors: AnchorSearch, probes: tuple[re.Pattern[bytes], ...]) -> BlockScan:
    candidates = candidate_starts(block, anchors, probes)
    if candidates:  # the scanner counts the lines between them anyway
        return BlockScan(-1, candidates, None, block)
    lines = block.count(b"\n") + (0 if not block or block.endswith(b"\n") else 1)
    after_last = len(block) if block.endswith(b"\n") else len(block) + 1
    return BlockScan(lines, candidates, timestamp_before(block, after_last, TS_REACH), block)


def blocks(stream: BinaryIO, size: int = BLOCK) -> Iterator[bytes]:
    """Blocks of complete lines (the last may lack its newline), with ANSI codes removed and every line
    longer than MAX_LINE cut to its ends, so memory stays bounded whatever the stream holds."""
    pending = b""
    head: bytes | None = None  # the start of a line longer than MAX_LINE still being read
    while True:
        chunk = stream.read(size)
        if head is not None:
            nl = chunk.find(b"\n")
            if nl == -1 and chunk:
                pending = (pending + chunk)[-HEAD:]
                continue
            first = pending + (chunk if nl == -1 else chunk[:nl])
            pending = head + ELLIPSIS_BYTES + first[-HEAD:]
            chunk = b"" if nl == -1 else chunk[nl:]
            head = None
            if not chunk:
                yield last_line(pending)
                return
        if not chunk:
            if pending:
                yield last_line(pending)
            return
        cut = chunk.rfind(b"\n") + 1
        if cut:
            # One copy per block: the previous block's unfinished line joins this one's finished lines.
            if pending:
                block = b"".join((pending, memoryview(chunk)[:cut]))
            else:
                block = chunk if cut == len(chunk) else chunk[:cut]
            yield clean(block)
            pending = chunk[cut:]
        else:
            pending += chunk
        if len(pending) > MAX_LINE:
            head, pending = pending[:HEAD], pending[-HEAD:]


def last_line(pending: bytes) -> bytes:
    """The stream's last line, which has no newline: cleaned like a block, but a line made only of colour
    codes (b"\\x1b@") is still a line, so it is kept as an empty one (an empty block would count none)."""
    return clean(pending) or b"\n"


def clean(block: bytes) -> bytes:
    # One-byte searches are memchr-fast; "^[" (caret notation) is only looked for where a "^" is.
    if b"\x1b" in block or (b"^" in block and b"^[" in block):
        # Colour codes can split an anchor ("Already \x1b[1mborrowed"); they never span lines. Codes kept
        # as text ("ESC[1m", or "[1m" whose ESC a paste lost) are removed per line (normalize): looking
        # for them here would cost more than the rest of the search, and they sit in prefixes, not inside
        # the phrases the anchors are made of.
        return without_raw_codes(block)
    return block


def candidate_starts(block: bytes, anchors: AnchorSearch, probes: tuple[re.Pattern[bytes], ...] = ()) -> list[int]:
    """Offsets of the starts of the lines of `block` that contain any anchor or match any probe, ascending."""
    starts: set[int] = set()
    find, rfind = block.find, block.rfind
    for probe in probes:
        m = probe.search(block)
        while m is not None:
            starts.add(rfind(b"\n", 0, m.start()) + 1)
            nl = find(b"\n", m.end())
            if nl == -1:
                break
            m = probe.search(block, nl + 1)
    for i in anchors.positions(block):
        starts.add(rfind(b"\n", 0, i) + 1)
    return sorted(starts)


def region_start(block: bytes, start: int, floor: int) -> int:
    """Where the per-line path must begin to read the line at `start` as the exact path would: at the
    first line of the traceback it is in (its frames and code are not messages), not before `floor`.
    Lines of other processes in between (interleaved output) are read too; they do not end it."""
    end = block.find(b"\n", start)
    process = normalize(block[start : len(block) if end == -1 else end]).process
    begin = earliest = start
    others = 0
    for _ in range(MAX_WINDOW_LINES):
        if begin <= floor:
            return floor
        prev_begin = block.rfind(b"\n", 0, begin - 1) + 1
        if prev_begin < floor:
            return earliest
        line = normalize(block[prev_begin : begin - 1])
        begin = prev_begin
        if line.process != process:
            # another process's line: the traceback may have started above it, a few lines up at most
            others += 1
            if others > MAX_INTERLEAVED:
                return earliest
            continue
        kind = classify(line.message)
        if kind is Kind.HEADER:
            return prev_begin
        if kind is Kind.OTHER:
            return earliest
        earliest = prev_begin
    return earliest


def timestamp_before(block: bytes, start: int, max_lines: int) -> tuple[str, int] | None:
    """The timestamp of the nearest line above offset `start` that has one, and how many lines above
    it is (1: the line just before); None when none within `max_lines` lines of this block."""
    end = start - 1  # the newline ending the previous line
    for distance in range(1, max_lines + 1):
        if end < 0:
            return None
        begin = block.rfind(b"\n", 0, end) + 1
        ts = normalize(block[begin:end]).timestamp
        if ts is not None:
            return ts, distance
        end = begin - 1
    return None
