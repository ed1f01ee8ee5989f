"""The scanner: lines in, hits and per-problem findings out, in constant memory.

Two ways in, one set of rules:

* `feed(line)` runs every line through normalisation, the traceback tracker and the signatures (what
  `borrowguard verify` and follow mode use: lines arrive one at a time);
* `scan_stream(binary_file)` reads blocks of megabytes, looks for the signatures' anchors (and traceback
  headers and the server's start-up lines) with substring search and runs only the lines around them
  through the same per-line path (a whole traceback when one is open, across blocks and interleaved
  processes). Lines without an anchor cannot start an occurrence, so the findings are the same; only a
  timestamp that a line inherits from far above it can be missed.

Besides the signatures, every line passes the server watch (start-up phase and configuration, see
`scan.startup`): occurrences of a signature with `startup = "ignore"` are held back until it is clear
that the server was not starting when they were logged.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import BinaryIO

from borrowguard.knowledge import KnowledgeBase, load
from borrowguard.knowledge.model import Confidence
from borrowguard.knowledge.signatures import Signature, compile_signatures, minimal_anchors
from borrowguard.scan import attribution, fast, startup
from borrowguard.scan.attribution import Evidence
from borrowguard.scan.bulk import BulkReading
from borrowguard.scan.chain import build_chain
from borrowguard.scan.fast import TS_REACH
from borrowguard.scan.model import Hit, LogFinding, ScanResult, excerpt
from borrowguard.scan.normalize import Line, normalize
from borrowguard.scan.record import engine_causes, record
from borrowguard.scan.shapes import unglue
from borrowguard.scan.state import SourceState, Stall
from borrowguard.scan.tracebacks import (
    BARE_HEADER,
    MAX_WINDOW_LINES,
    MAX_WINDOWS,
    Kind,
    Window,
    classify,
    exception_line,
    indentation,
    tokenizer_frame,
)

MAX_WARNINGS = 20
TRACEBACK = "Traceback (most recent call last)"
FENCE = "```"


@dataclass(frozen=True)
class _Tables:
    """What a scanner reads a knowledge base through: the same for every scanner of that base, so it is
    made once (compiling and checking every pattern and building the anchor automaton take ~0.1 s, which
    verify, follow mode and the tests would otherwise pay for each scanner)."""

    signatures: tuple[Signature, ...]
    context_signatures: tuple[Signature, ...]
    anchor_search: fast.AnchorSearch
    anchors: tuple[str, ...]
    probes: tuple[str, ...]
    probe_bytes: tuple[re.Pattern[bytes], ...]
    message_signatures: tuple[Signature, ...]
    message_anchors: fast.AnchorSets
    """The message signatures' anchors: which of them a line can match."""
    frame_signatures: tuple[int, ...]
    stall_signatures: tuple[int, ...]
    mentioned_in_changes: frozenset[str]
    """Problems that a change's description only names (see ChangeProse): its prose lines there count none."""


@lru_cache(maxsize=8)
def _tables(kb: KnowledgeBase, accelerate: bool) -> _Tables:
    signatures = compile_signatures(kb)
    # Two equivalent ways to find the lines worth parsing: every anchor in one Aho-Corasick pass
    # (ahocorasick-rs installed), or one substring search per anchor plus regex probes where an anchor
    # would be common (stdlib only). The server watch's start-up lines are anchors too.
    # Traceback headers too: a traceback is then read whole from its first line, whichever block or
    # process interleaving it spans, as the per-line path reads it.
    context_signatures = tuple(s for s in signatures if s.context is not None)
    # the lines that attribute a match by its context are read too (see scan.attribution)
    evidence = tuple(a for s in context_signatures for a in s.context.literals())  # type: ignore[union-attr]
    extra = (*startup.ANCHORS, TRACEBACK, *evidence)
    if kb.change.cues:
        # a change's description is followed from its cue, and a code fence's lines are its pasted output
        extra += (*kb.change.cues, FENCE)

    def declared(name: str) -> list[str]:
        return [a for s in signatures for a in getattr(s, name)]

    probes: tuple[str, ...] = ()
    search = fast.AnchorSearch(
        minimal_anchors(a.encode() for a in (*extra, *declared("anchors"))), accelerate=accelerate
    )
    if not search.accelerated:
        search = fast.AnchorSearch(
            minimal_anchors(a.encode() for a in (*extra, *declared("find_anchors"))), accelerate=False
        )
        probes = tuple(dict.fromkeys(p for s in signatures for p in s.probes))
    message_signatures = tuple(s for s in signatures if s.message)
    return _Tables(
        signatures=signatures,
        context_signatures=context_signatures,
        anchor_search=search,
        anchors=tuple(a.decode() for a in search.anchors),
        probes=probes,
        probe_bytes=tuple(re.compile(p.encode()) for p in probes),
        message_signatures=message_signatures,
        message_anchors=fast.AnchorSets([s.anchors for s in message_signatures], accelerate=accelerate),
        frame_signatures=tuple(i for i, s in enumerate(signatures) if s.frames),
        stall_signatures=tuple(i for i, s in enumerate(signatures) if s.stall),
        mentioned_in_changes=(
            frozenset(p.id for p in kb if p.mentioned_in_changes) if kb.change.cues or kb.change.titles else frozenset()
        ),
    )


class Scanner(BulkReading):
    """Matches log lines against the knowledge base's signatures.

    >>> sc = Scanner()
    >>> [(h.id, h.confidence.value) for h in sc.feed('{"detail": "Already borrowed"}', source="server.log")]
    [('tokenizer-already-borrowed', 'high')]
    """

    def __init__(self, kb: KnowledgeBase | None = None) -> None:
        self.kb = kb if kb is not None else load()
        tables = _tables(self.kb, fast.accelerated())
        self.signatures: tuple[Signature, ...] = tables.signatures
        self._ctx_sigs = tables.context_signatures
        self._anchor_search = tables.anchor_search
        self.anchors: tuple[str, ...] = tables.anchors
        self.probes: tuple[str, ...] = tables.probes
        self._probe_bytes = tables.probe_bytes
        self._message_sigs = tables.message_signatures
        self._message_anchors = tables.message_anchors
        self._frame_sigs = tables.frame_signatures
        self._stall_sigs = tables.stall_signatures
        self._mentioned = tables.mentioned_in_changes
        self._mentions: set[str] = set()
        self._server = startup.StartupWatch()
        self._findings: dict[str, LogFinding] = {}
        self._sources: dict[str, SourceState] = {}
        self._lines = 0
        self._warnings: list[str] = []
        self._lock = threading.RLock()

    # ---- input ------------------------------------------------------------------------------------

    def startup_facts(self) -> startup.StartupFacts | None:
        """What the server's start-up lines said so far (vLLM version, max_model_len, renderer workers...);
        None when they said nothing."""
        return self._server.config()

    def feed(self, line: str | bytes, source: str = "log") -> list[Hit]:
        """One line (without or with its newline); the hits it completes, which may include an earlier
        traceback of the same process that this line ends, or an earlier occurrence held back until it was
        clear that the server was not starting."""
        with self._lock:
            return self._process(self._source(source), line)

    def scan_stream(self, stream: BinaryIO, source: str) -> None:
        """A whole binary stream (file, gzip, stdin) by the fast path; closes its tracebacks at the end."""
        with self._lock:
            st = self._source(source)
            for block in fast.blocks(stream):
                self._apply(st, fast.analyse(block, self._anchor_search, self._probe_bytes))
            self._finish(st)

    def finish(self, source: str | None = None) -> list[Hit]:
        """End of input for `source` (all when None): tracebacks still open count as cut off, a stall
        marker with nothing after it is a hang, held-back occurrences count."""
        with self._lock:
            hits: list[Hit] = []
            for st in [self._sources[source]] if source in self._sources else list(self._sources.values()):
                hits += self._finish(st)
            return hits

    def settle_idle(self, quiet_s: float = attribution.IDLE_S) -> list[Hit]:
        """Followed logs: matched lines still waiting for their context (see scan.attribution) that were
        read more than `quiet_s` seconds ago are decided by what came so far; their hits."""
        with self._lock:
            before = time.monotonic() - quiet_s
            hits: list[Hit] = []
            for st in self._sources.values():
                if st.attribution.undecided:
                    hits += attribution.settle(self.kb, st.attribution, st.line_no, read_before=before)
            return self._record_all(hits)

    def warn(self, message: str) -> None:
        """Note a problem with the input itself (a truncated .gz, an unreadable file in follow mode)."""
        with self._lock:
            if len(self._warnings) < MAX_WARNINGS:
                self._warnings.append(excerpt(message))

    # ---- output -----------------------------------------------------------------------------------

    def result(self, min_confidence: Confidence | str = Confidence.LOW) -> ScanResult:
        """Findings so far (open tracebacks, stalls and held-back occurrences counted as at the end of the
        input, without ending it), worst first; only those at least as sure as `min_confidence`."""
        floor = Confidence(min_confidence)
        with self._lock:
            findings = {k: f.copy() for k, f in self._findings.items()}
            for st in self._sources.values():
                for hit in self._pending_hits(st):
                    record(findings, hit, self.kb)
            engine_causes(findings, self._sources, self.kb)
            seen = [f for f in findings.values() if f.confidence.rank >= floor.rank]
            ordered = sorted(seen, key=lambda f: -f.severity.rank)  # stable: first occurrence breaks ties
            config = self._server.config()
            return ScanResult(
                findings=ordered,
                chain=build_chain(seen, self.kb, config),
                lines=self._lines,
                sources=list(self._sources),
                warnings=list(self._warnings),
                server=config,
            )

    def _pending_hits(self, st: SourceState) -> list[Hit]:
        hits = list(st.pending) + attribution.pending(self.kb, st.attribution)
        for key, win in st.windows.items():
            hits += self._evaluate(st, key, win, None)
        return hits + self._stall_hits(st)

    # ---- the per-line path ------------------------------------------------------------------------

    def _source(self, name: str) -> SourceState:
        st = self._sources.get(name)
        if st is None:
            st = self._sources[name] = SourceState(name)
        return st

    def _process(self, st: SourceState, raw: str | bytes) -> list[Hit]:
        st.line_no += 1
        self._lines += 1
        n = st.line_no
        line = normalize(raw)
        if line.timestamp is not None:
            st.last_ts = (line.timestamp, n)
            ts: str | None = line.timestamp
        else:
            ts = st.last_ts[0] if st.last_ts is not None and n - st.last_ts[1] <= TS_REACH else None
        hits = self._record_all(st.due())
        win = st.windows.get(line.process)
        if win is not None and win.bare() and line.message.rstrip() == BARE_HEADER:
            # a second opener right after one: the first was a traceback of no lines, which counts nothing;
            # this one takes its place (hostile logs of nothing but openers stay cheap)
            win.start_line, win.lines = n, 0
            return hits
        if self._ctx_sigs:
            hits += self._note_evidence(st, line, n)
        if self._mentioned:
            self._watch_change(st, line.message, n)
        if classify(line.message) is Kind.OTHER and not (win is not None and win.flat and _flat_code(line)):
            # start-up lines are log messages, never the code quoted in a traceback
            phase = self._server.observe(line.message)
            if phase is not None:
                hits += self._record_all(st.on_phase(phase))
        if self._stall_sigs:
            self._watch_stalls(st, line, n, ts)
        parts = unglue(line.message) if "\\n" in line.message or "Traceback (" in line.message else None
        if parts is None:
            return hits + self._traceback_step(st, line, n, ts)
        # a traceback held in one line (a JSON record's escapes, glued frames): its lines in order, one record
        for part in parts:
            hits += self._traceback_step(st, line._replace(message=part), n, ts)
        win = st.windows.get(line.process)
        return hits + (self._close(st, line.process, win, None) if win is not None else [])

    def _traceback_step(self, st: SourceState, line: Line, n: int, ts: str | None) -> list[Hit]:
        key = line.process
        message = line.message
        kind = classify(message)
        hits: list[Hit] = []
        win = st.windows.get(key)
        if win is not None:
            win.lines += 1
            if kind is Kind.OTHER and win.flat and _flat_code(line):
                kind = Kind.INDENTED  # an unindented code line of a paste that lost its indentation
            elif (
                kind is Kind.INDENTED and win.indent and indentation(message) == win.indent
                and exception_line(message.lstrip())
            ):
                kind = Kind.OTHER  # an indented traceback (pytest's thread warning) ends as indented as its header
            if kind is Kind.OTHER:
                # The line after a traceback: its exception line (counted once per traceback) or a cut.
                hits += self._match(st, line, n, ts, win)
                exc = message.lstrip() if exception_line(message.lstrip()) else None
                return hits + self._close(st, key, win, exc)
            if kind is Kind.HEADER or win.lines > MAX_WINDOW_LINES:
                hits += self._close(st, key, win, None)
                win = None
        if win is None and kind in (Kind.HEADER, Kind.FRAME):
            win = self._open(st, key, n)
            if kind is Kind.HEADER:
                win.indent = indentation(message)
        if kind is Kind.HEADER:
            return hits  # a traceback's first line is never an occurrence (a glued one is split before)
        if win is not None:
            # Frames and source lines are code, not messages: `if "Already borrowed" in str(e):` in a
            # traceback is not an occurrence. They only count through `frames`.
            if kind is Kind.FRAME:
                win.flat = win.flat or message[:1] == "F"
                win.tokenizer = win.tokenizer or tokenizer_frame(message)
                win.last_frame = win.last_line = message
            elif win.last_line == win.last_frame and message.strip(" \t^~"):
                win.last_line = message  # the innermost frame's first source line (carets aside)
            for sig in self._ctx_sigs:
                if kind is Kind.FRAME:
                    seen = attribution.line_evidence(sig.context, message)  # type: ignore[arg-type]
                else:  # a source line: the call it makes, read with the frame it is in
                    seen = attribution.frame_evidence(sig.context, win.last_frame, message)  # type: ignore[arg-type]
                if seen is not None:
                    win.evidence = seen  # the innermost one decides
                    win.by_package = kind is not Kind.FRAME and seen[0] is not None and sig.context.library(message) is None  # type: ignore[union-attr]
                    break
            self._advance(win, message, n, ts)
            return hits
        return hits + self._match(st, line, n, ts, win)

    def _open(self, st: SourceState, key: str | None, n: int) -> Window:
        if len(st.windows) >= MAX_WINDOWS:
            oldest = next(iter(st.windows))
            # Recorded; the caller of this line does not see the hits of an evicted traceback.
            self._close(st, oldest, st.windows[oldest], None)
        win = st.windows[key] = Window(start_line=n, context=set(st.context_for(key, n)))
        return win

    def _advance(self, win: Window, message: str, n: int, ts: str | None) -> None:
        for i in self._frame_sigs:
            frames = self.signatures[i].frames
            done = win.progress.get(i, 0)
            # several steps may match one line: a paste can glue the code onto its frame line
            while done < len(frames) and frames[done].search(message):
                if done == 0:
                    win.frames_at[i] = (n, ts, [message.strip()])
                elif win.frames_at[i][2][-1] != message.strip():
                    win.frames_at[i][2].append(message.strip())
                done += 1
            win.progress[i] = done

    def _match(self, st: SourceState, line: Line, n: int, ts: str | None, win: Window | None) -> list[Hit]:
        message = line.message
        hits: list[Hit] = []
        waiting: set[str] = set()
        for i in self._message_anchors.holding(message):
            sig = self._message_sigs[i]
            for pattern in sig.message:
                m = pattern.search(message)
                if m is not None:
                    break
            else:
                continue
            if sig.excluded(message) or any(h.id == sig.problem_id for h in hits):
                continue
            if sig.problem_id in self._mentioned and win is None and self._in_change_prose(st, line, n):
                self._mention(sig.problem_id)
                continue
            if sig.context is not None and any(q.search(message) for q in sig.context.quoted):
                continue
            if win is not None:
                if sig.problem_id in win.counted:
                    continue
                win.counted.add(sig.problem_id)
            detail = sig.detail or m.groupdict().get("detail")
            hit = Hit(
                sig.problem_id, sig.severity, st.name, n, ts, line.process, excerpt(message), detail,
                sig.confidence,
            )
            if sig.context is not None:
                waiting.add(sig.problem_id)
                decided = attribution.attribute(
                    self.kb, st.attribution, sig, hit, message, *attribution.in_traceback(win)
                )
                if decided is None:
                    continue
                hit = decided
            if sig.ignore_startup and st.starting is not False:
                if st.starting is None or st.stuck_starting(sig.problem_id, n):
                    st.hold(hit)  # counts unless a start-up line shows the server busy starting after it
                continue
            hits.append(hit)
        st.note_recent(line.process, n, {h.id for h in hits} | waiting)
        return self._record_all(hits)

    def _watch_change(self, st: SourceState, message: str, n: int) -> None:
        if message.lstrip().startswith(FENCE):
            st.fenced = not st.fenced
        elif self.kb.change.cue_in(message) or (n == 1 and self.kb.change.opens(message)):
            st.change_at = n  # a change's title heading the text opens its description as a cue does

    def _watch_first_line(self, st: SourceState, block: bytes) -> None:
        """The fast path reads a block's lines only around anchors: its first line, when the source begins
        with it, is read here for a change's title (which `_watch_change` reads on the per-line path)."""
        if st.line_no == 0 and self._mentioned and block:
            end = block.find(b"\n")
            if self.kb.change.opens(normalize(block if end == -1 else block[:end]).message):
                st.change_at = 1

    def _in_change_prose(self, st: SourceState, line: Line, n: int) -> bool:
        """A line of prose (no log header, outside a code fence) within reach of a change's description, or
        a change's title."""
        if st.fenced or line.level is not None or line.timestamp is not None:
            return False
        if st.change_at is not None and n - st.change_at <= self.kb.change.reach:
            return True
        return self.kb.change.is_title(line.message)

    def _mention(self, problem_id: str) -> None:
        if problem_id not in self._mentions:
            self._mentions.add(problem_id)
            self.warn(f"{problem_id}: named in a change's description (what the change handles), not counted")

    def _note_evidence(self, st: SourceState, line: Line, n: int) -> list[Hit]:
        """Remember a line that names the tokenizer or another library; the waiting matches it decides."""
        att = st.attribution
        # a source line is read as code only inside a traceback: the fast path reads a traceback whole, but
        # outside one only the lines holding an anchor (a literal), never a line that the code regex matches
        win = st.windows.get(line.process)
        code = win is not None and (classify(line.message) is not Kind.OTHER or (win.flat and _flat_code(line)))
        for sig in self._ctx_sigs:
            seen = attribution.line_evidence(sig.context, line.message, code=code)  # type: ignore[arg-type]
            if seen is not None:
                att.evidence.append(Evidence(n, line.process, seen[0], seen[1]))
                break
        return self._record_all(attribution.settle(self.kb, att, n)) if att.undecided else []

    def _evaluate(self, st: SourceState, key: str | None, win: Window, exc: str | None) -> list[Hit]:
        hits: list[Hit] = []
        counted = win.counted | win.context
        for i, (n0, ts0, texts) in sorted(win.frames_at.items()):  # in rule order: the first rule's excerpt
            sig = self.signatures[i]
            if win.progress[i] < len(sig.frames) or sig.problem_id in counted:
                continue
            confirm = (*sig.raises, *sig.message)
            if exc is not None and (sig.excluded(exc) or (confirm and not any(p.search(exc) for p in confirm))):
                continue
            confidence = sig.confidence if exc is not None else sig.when_cut
            if confidence is None:
                continue
            if exc is None and sig.cut_inside is not None and not sig.cut_inside.search(win.last_frame):
                continue
            if exc is None and sig.cut_not_at is not None and sig.cut_not_at.search(win.last_line):
                continue
            counted.add(sig.problem_id)
            text = " | ".join(texts) + ("" if exc is not None else " | (cut before the exception)")
            says = sig.says or (
                "its traceback's frames and exception line" if exc is not None
                else "its traceback's frames only: the excerpt is cut before the exception line"
            )
            hits.append(Hit(
                sig.problem_id, sig.severity, st.name, n0, ts0, key, excerpt(text), sig.detail, confidence, says,
            ))
        return hits

    def _close(self, st: SourceState, key: str | None, win: Window, exc: str | None) -> list[Hit]:
        del st.windows[key]
        if exc is not None:
            st.end_traceback(st.line_no, key, excerpt(exc), win.tokenizer)
        hits = self._evaluate(st, key, win, exc)
        # a traceback chained from this one ("During handling of the above exception...") is the same occurrence
        st.note_recent(key, st.line_no, win.counted | win.context | {h.id for h in hits})
        return self._record_all(hits)

    def _watch_stalls(self, st: SourceState, line: Line, n: int, ts: str | None) -> None:
        message = line.message
        for i in self._stall_sigs:
            sig = self.signatures[i]
            if not any(a in message for a in sig.anchors):
                continue
            # whichever comes last on the line decides: a paste that lost its line breaks holds a whole run of lines
            stalled = max((m.start() for p in sig.stall for m in p.finditer(message)), default=-1)
            resumed = max((m.start() for p in sig.resume for m in p.finditer(message)), default=-1)
            if resumed > stalled:
                st.stalls.pop(i, None)
            elif stalled >= 0:
                st.stalls[i] = Stall(n, ts, line.process, excerpt(message))

    def _stall_hits(self, st: SourceState) -> list[Hit]:
        hits = []
        for i, stall in st.stalls.items():
            sig = self.signatures[i]
            if st.line_no - stall.line_no <= sig.stall_lines:
                hits.append(
                    Hit(sig.problem_id, sig.severity, st.name, stall.line_no, stall.timestamp, stall.process,
                        stall.text, sig.detail, sig.confidence)
                )
        return hits

    def _finish(self, st: SourceState) -> list[Hit]:
        hits: list[Hit] = []
        for key, win in list(st.windows.items()):
            hits += self._close(st, key, win, None)
        held, st.pending = st.pending, []
        hits += self._record_all(held + self._stall_hits(st) + attribution.settle(self.kb, st.attribution, 0, end=True))
        st.stalls.clear()
        return hits

    def _record_all(self, hits: list[Hit]) -> list[Hit]:
        for hit in hits:
            record(self._findings, hit, self.kb)
            st = self._sources.get(hit.source)
            if st is not None and st.stalls:
                # an error after a stall marker: the log says what went wrong, it is not a silent hang
                for i in [i for i in st.stalls if self.signatures[i].problem_id == hit.id]:
                    del st.stalls[i]
        return hits


def _flat_code(line: Line) -> bool:
    """In a traceback that lost its indentation: a line without a log header that is not an exception
    line is the code of the frame above it."""
    return line.level is None and line.timestamp is None and bool(line.message) and not exception_line(line.message)
