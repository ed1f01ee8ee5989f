"""The scanner's fast path: blocks of megabytes, read line by line only around anchors (see scanner)."""

from __future__ import annotations

from borrowguard.scan import fast
from borrowguard.scan.fast import TS_REACH, BlockScan
from borrowguard.scan.model import Hit
from borrowguard.scan.normalize import normalize
from borrowguard.scan.state import SourceState
from borrowguard.scan.tracebacks import BARE_HEADER, Kind, classify

OPENER = b"Traceback (most recent call last)"


class BulkReading:
    """Mixed into Scanner: the per-line path (`_process`) applied to the parts of a block that matter."""

    _lines: int

    def _process(self, st: SourceState, raw: str | bytes) -> list[Hit]:  # pragma: no cover - Scanner's
        raise NotImplementedError

    def _watch_first_line(self, st: SourceState, block: bytes) -> None:  # pragma: no cover - Scanner's
        raise NotImplementedError

    def _apply(self, st: SourceState, scan: BlockScan) -> None:
        self._watch_first_line(st, scan.block)
        if st.windows:  # a traceback open at the end of the previous block goes on in this one
            done = self._scan_block(st, scan.block, [0, *scan.candidates])
        elif scan.candidates:
            done = self._scan_block(st, scan.block, scan.candidates)
        else:
            done = 0
            self._skip(st, scan.lines)
            if scan.tail_timestamp is not None:
                st.last_ts = (scan.tail_timestamp[0], st.line_no + 1 - scan.tail_timestamp[1])
        self._read_tail(st, scan.block, done)

    def _read_tail(self, st: SourceState, block: bytes, floor: int) -> None:
        """A traceback that starts at the end of a block (its header or first frames) and goes on in the
        next one must be open when the next block is read: those lines are read now, as the per-line
        path reads them, from the traceback's first line (they were skipped, so they are un-counted)."""
        if st.windows or not block:
            return
        end = len(block) - 1 if block.endswith(b"\n") else len(block)
        last = block.rfind(b"\n", 0, end) + 1
        if last < floor or classify(normalize(block[last:end]).message) is Kind.OTHER:
            return
        start = fast.region_start(block, last, floor)
        lines = block.count(b"\n", start) + (0 if block.endswith(b"\n") else 1)
        self._skip(st, -lines)
        pos = start
        while pos <= end:
            nl = block.find(b"\n", pos)
            stop = len(block) if nl == -1 else nl
            self._process(st, block[pos:stop])
            pos = stop + 1

    def repeat_opener(self, st: SourceState, raw: bytes, count: int) -> bool:
        """`raw`, just read, is repeated on the next `count` lines. When it is a bare traceback opener that
        took the place of its bare window (see Scanner._process), the repeats do the same: applied at once.
        False when the shortcut does not apply (they are read one by one)."""
        line = normalize(raw)
        win = st.windows.get(line.process)
        if win is None or not win.bare() or line.message.rstrip() != BARE_HEADER or win.start_line != st.line_no:
            return False
        self._skip(st, count)
        win.start_line, win.lines = st.line_no, 0
        if line.timestamp is not None:
            st.last_ts = (line.timestamp, st.line_no)
        return True

    def _repeats(self, st: SourceState, block: bytes, raw: bytes, pos: int) -> int:
        """Past the copies of traceback opener `raw` that follow it (read in one step; see Scanner)."""
        line = raw + b"\n"
        count, at = 0, pos
        while block.startswith(line, at):
            count += 1
            at += len(line)
        if count and self.repeat_opener(st, raw, count):
            return at
        return pos

    def _skip(self, st: SourceState, lines: int) -> None:
        st.line_no += lines
        self._lines += lines

    def _scan_block(self, st: SourceState, block: bytes, candidates: list[int]) -> int:
        """Lines of `block` (complete lines) through the per-line path only where an anchor is, plus
        every line of a traceback that one of them is in or opens; returns where reading stopped."""
        pos = 0
        end = len(block)
        for candidate in candidates:
            if candidate < pos:
                continue  # already read as part of the previous region
            start = fast.region_start(block, candidate, pos)
            if start > pos:
                self._skip(st, block.count(b"\n", pos, start))
                found = fast.timestamp_before(block, start, TS_REACH)
                if found is not None:
                    st.last_ts = (found[0], st.line_no + 1 - found[1])
            pos = start
            while pos < end:
                nl = block.find(b"\n", pos)
                stop = end if nl == -1 else nl
                raw = block[pos:stop]
                self._process(st, raw)
                pos = stop + 1
                if nl != -1 and OPENER in raw:
                    pos = self._repeats(st, block, raw, pos)
                if pos > candidate and not st.windows:
                    break
        if pos < end:
            self._skip(st, block.count(b"\n", pos) + (0 if block.endswith(b"\n") else 1))
            # The next block's first lines may inherit a timestamp from this block's skipped tail.
            after_last = end if block.endswith(b"\n") else end + 1
            found = fast.timestamp_before(block, after_last, TS_REACH)
            if found is not None:
                st.last_ts = (found[0], st.line_no + 1 - found[1])
        return pos
