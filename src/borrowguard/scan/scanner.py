"""The scanner: lines in, hits and per-problem findings out, in constant memory.

Two ways in, one set of rules:

* `feed(line)` runs every line through normalisation, the traceback tracker and the signatures (what
  `borrowguard verify` and follow mode use: lines arrive one at a time);
* `scan_stream(binary_file)` reads blocks of megabytes, looks for the signatures' anchors with substring
  search and runs only the lines around them through the same per-line path (a whole traceback when one
  is open). Lines without an anchor cannot start an occurrence, so the findings are the same; only a
  timestamp that a line inherits from far above it can be missed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from borrowguard.knowledge import KnowledgeBase, load
from borrowguard.knowledge.signatures import Signature, compile_signatures, minimal_anchors
from borrowguard.scan import fast
from borrowguard.scan.chain import build_chain
from borrowguard.scan.fast import TS_REACH, BlockScan
from borrowguard.scan.model import SEVERITY_RANK, Finding, Hit, ScanResult, excerpt
from borrowguard.scan.normalize import Line, normalize
from borrowguard.scan.tracebacks import MAX_WINDOW_LINES, MAX_WINDOWS, Kind, Window, classify, exception_line

MAX_WARNINGS = 20


@dataclass
class _Source:
    name: str
    line_no: int = 0
    last_ts: tuple[str, int] | None = None
    windows: dict[str | None, Window] = field(default_factory=dict)


class Scanner:
    """Matches log lines against the knowledge base's signatures.

    >>> sc = Scanner()
    >>> [h.id for h in sc.feed("RuntimeError: Already borrowed", source="server.log")]
    ['tokenizer-already-borrowed']
    """

    def __init__(self, kb: KnowledgeBase | None = None) -> None:
        self.kb = kb if kb is not None else load()
        self.signatures: tuple[Signature, ...] = compile_signatures(self.kb)
        # Two equivalent ways to find the lines worth parsing: every anchor in one Aho-Corasick pass
        # (ahocorasick-rs installed), or one substring search per anchor plus regex probes where an anchor
        # would be common (stdlib only). See knowledge.signatures.
        search = fast.AnchorSearch(minimal_anchors(a.encode() for s in self.signatures for a in s.anchors))
        if search.accelerated:
            self.probes: tuple[str, ...] = ()
        else:
            search = fast.AnchorSearch(
                minimal_anchors(a.encode() for s in self.signatures for a in s.find_anchors), accelerate=False
            )
            self.probes = tuple(dict.fromkeys(p for s in self.signatures for p in s.probes))
        self._anchor_search = search
        self.anchors: tuple[str, ...] = tuple(a.decode() for a in search.anchors)
        self._probe_bytes = tuple(re.compile(p.encode()) for p in self.probes)
        self._message_sigs = tuple(s for s in self.signatures if s.message)
        self._frame_sigs = tuple(i for i, s in enumerate(self.signatures) if s.frames)
        self._findings: dict[str, Finding] = {}
        self._sources: dict[str, _Source] = {}
        self._lines = 0
        self._warnings: list[str] = []
        self._lock = threading.RLock()

    # ---- input ------------------------------------------------------------------------------------

    def feed(self, line: str | bytes, source: str = "log") -> list[Hit]:
        """One line (without or with its newline); the hits it completes, which may include an earlier
        traceback of the same process that this line ends."""
        with self._lock:
            return self._process(self._source(source), line)

    def feed_lines(self, lines: Iterable[str | bytes], source: str = "log") -> None:
        for line in lines:
            self.feed(line, source)

    def scan_stream(self, stream: BinaryIO, source: str) -> None:
        """A whole binary stream (file, gzip, stdin) by the fast path; closes its tracebacks at the end."""
        with self._lock:
            st = self._source(source)
            for block in fast.blocks(stream):
                self._apply(st, fast.analyse(block, self._anchor_search, self._probe_bytes))
            self._finish(st)

    def finish(self, source: str | None = None) -> list[Hit]:
        """End of input for `source` (all when None): tracebacks still open count as cut off."""
        with self._lock:
            hits: list[Hit] = []
            for st in [self._sources[source]] if source in self._sources else list(self._sources.values()):
                hits += self._finish(st)
            return hits

    def warn(self, message: str) -> None:
        """Note a problem with the input itself (a truncated .gz, an unreadable file in follow mode)."""
        with self._lock:
            if len(self._warnings) < MAX_WARNINGS:
                self._warnings.append(excerpt(message))

    # ---- output -----------------------------------------------------------------------------------

    def result(self) -> ScanResult:
        """Findings so far (tracebacks still open count as cut off, without closing them), worst first."""
        with self._lock:
            findings = {k: f.copy() for k, f in self._findings.items()}
            for st in self._sources.values():
                for key, win in st.windows.items():
                    for hit in self._evaluate(st, key, win, None):
                        _record(findings, hit, self.kb)
            seen = list(findings.values())  # in order of first occurrence: ties in the chain keep it
            ordered = sorted(seen, key=lambda f: -SEVERITY_RANK[f.severity])
            return ScanResult(
                findings=ordered,
                chain=build_chain(seen, self.kb),
                lines=self._lines,
                sources=list(self._sources),
                warnings=list(self._warnings),
            )

    # ---- the per-line path ------------------------------------------------------------------------

    def _source(self, name: str) -> _Source:
        st = self._sources.get(name)
        if st is None:
            st = self._sources[name] = _Source(name)
        return st

    def _process(self, st: _Source, raw: str | bytes) -> list[Hit]:
        st.line_no += 1
        self._lines += 1
        n = st.line_no
        line = normalize(raw)
        if line.timestamp is not None:
            st.last_ts = (line.timestamp, n)
            ts: str | None = line.timestamp
        else:
            ts = st.last_ts[0] if st.last_ts is not None and n - st.last_ts[1] <= TS_REACH else None
        key = line.process
        kind = classify(line.message)
        hits: list[Hit] = []
        win = st.windows.get(key)
        if win is not None:
            win.lines += 1
            if kind is Kind.OTHER:
                # The line after a traceback: its exception line (counted once per traceback) or a cut.
                hits += self._match(st, line, n, ts, win)
                exc = line.message if exception_line(line.message) else None
                hits += self._close(st, key, win, exc)
                return hits
            if kind is Kind.HEADER or win.lines > MAX_WINDOW_LINES:
                hits += self._close(st, key, win, None)
                win = None
        if win is None and kind in (Kind.HEADER, Kind.FRAME):
            win = self._open(st, key, n)
        if win is not None and kind is not Kind.HEADER:
            # Frames and source lines are code, not messages: `if "Already borrowed" in str(e):` in a
            # traceback is not an occurrence. They only count through `frames`.
            self._advance(win, line.message, n, ts)
            return hits
        hits += self._match(st, line, n, ts, win)
        return hits

    def _open(self, st: _Source, key: str | None, n: int) -> Window:
        if len(st.windows) >= MAX_WINDOWS:
            oldest = next(iter(st.windows))
            # Recorded; the caller of this line does not see the hits of an evicted traceback.
            self._close(st, oldest, st.windows[oldest], None)
        win = st.windows[key] = Window(start_line=n)
        return win

    def _advance(self, win: Window, message: str, n: int, ts: str | None) -> None:
        for i in self._frame_sigs:
            frames = self.signatures[i].frames
            done = win.progress.get(i, 0)
            if done < len(frames) and frames[done].search(message):
                win.progress[i] = done + 1
                if done == 0:
                    win.frames_at[i] = (n, ts, [message.strip()])
                else:
                    win.frames_at[i][2].append(message.strip())

    def _match(self, st: _Source, line: Line, n: int, ts: str | None, win: Window | None) -> list[Hit]:
        message = line.message
        hits: list[Hit] = []
        for sig in self._message_sigs:
            if not any(a in message for a in sig.message_anchors):
                continue
            for pattern in sig.message:
                m = pattern.search(message)
                if m is not None:
                    break
            else:
                continue
            if sig.excluded(message) or any(h.id == sig.problem_id for h in hits):
                continue
            if win is not None:
                if sig.problem_id in win.counted:
                    continue
                win.counted.add(sig.problem_id)
            detail = m.groupdict().get("detail")
            hits.append(
                Hit(sig.problem_id, sig.severity, st.name, n, ts, line.process, excerpt(message), detail)
            )
        for hit in hits:
            _record(self._findings, hit, self.kb)
        return hits

    def _evaluate(self, st: _Source, key: str | None, win: Window, exc: str | None) -> list[Hit]:
        hits: list[Hit] = []
        counted = set(win.counted)
        for i, (n0, ts0, texts) in win.frames_at.items():
            sig = self.signatures[i]
            if win.progress[i] < len(sig.frames) or sig.problem_id in counted:
                continue
            if exc is not None and (
                sig.excluded(exc) or not any(p.search(exc) for p in (*sig.raises, *sig.message))
            ):
                continue
            counted.add(sig.problem_id)
            text = " | ".join(texts) + ("" if exc is not None else " | (cut before the exception)")
            hits.append(Hit(sig.problem_id, sig.severity, st.name, n0, ts0, key, excerpt(text)))
        return hits

    def _close(self, st: _Source, key: str | None, win: Window, exc: str | None) -> list[Hit]:
        del st.windows[key]
        hits = self._evaluate(st, key, win, exc)
        for hit in hits:
            _record(self._findings, hit, self.kb)
        return hits

    def _finish(self, st: _Source) -> list[Hit]:
        hits: list[Hit] = []
        for key, win in list(st.windows.items()):
            hits += self._close(st, key, win, None)
        return hits

    # ---- the fast path ----------------------------------------------------------------------------

    def _apply(self, st: _Source, scan: BlockScan) -> None:
        if scan.block is None:
            st.line_no += scan.lines
            self._lines += scan.lines
            if scan.tail_timestamp is not None:
                st.last_ts = (scan.tail_timestamp[0], st.line_no + 1 - scan.tail_timestamp[1])
            return
        self._scan_block(st, scan.block, scan.candidates)

    def _scan_block(self, st: _Source, block: bytes, candidates: list[int]) -> None:
        """Lines of `block` (complete lines) through the per-line path only where an anchor is, plus
        every line of a traceback that one of them is in or opens."""
        pos = 0
        end = len(block)
        for candidate in candidates:
            if candidate < pos:
                continue  # already read as part of the previous region
            start = fast.region_start(block, candidate, pos)
            if start > pos:
                skipped = block.count(b"\n", pos, start)
                st.line_no += skipped
                self._lines += skipped
                found = fast.timestamp_before(block, start, TS_REACH)
                if found is not None:
                    st.last_ts = (found[0], st.line_no + 1 - found[1])
            pos = start
            while pos < end:
                nl = block.find(b"\n", pos)
                stop = end if nl == -1 else nl
                self._process(st, block[pos:stop])
                pos = stop + 1
                if not st.windows:
                    break
        if pos < end:
            skipped = block.count(b"\n", pos) + (0 if block.endswith(b"\n") else 1)
            st.line_no += skipped
            self._lines += skipped
            # The next block's first lines may inherit a timestamp from this block's skipped tail.
            after_last = end if block.endswith(b"\n") else end + 1
            found = fast.timestamp_before(block, after_last, TS_REACH)
            if found is not None:
                st.last_ts = (found[0], st.line_no + 1 - found[1])


def _record(findings: dict[str, Finding], hit: Hit, kb: KnowledgeBase) -> None:
    finding = findings.get(hit.id)
    if finding is not None:
        finding.add(hit)
        return
    problem = kb.get(hit.id)
    finding = findings[hit.id] = Finding(
        id=hit.id,
        severity=hit.severity,
        title=problem.title if problem else hit.id,
        first=hit,
        last=hit,
        explanation=problem.explanation if problem else "",
        remedies=problem.remedies if problem else (),
        references=problem.references if problem else (),
        related=problem.related if problem else (),
    )
    finding._note(hit)
