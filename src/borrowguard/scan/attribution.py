"""Whose error is a matched line: attribution by context, not by string.

PyO3 raises "Already borrowed" for a borrow conflict on any Rust-backed object, so the words alone do not
say "tokenizer". A signature with a context table (rules.toml) is decided by what is around the line, the
nearest first:

1. the traceback it ends: the innermost frame or quoted source line that names the tokenizer (or another
   library) decides;
2. its own line: a tokenizer literal, an HTTP answer's shape carrying it, another library's name;
3. the lines of the same process within `reach` lines, above and below (a JSON stack trace lists its frames
   after the exception): the nearest evidence wins.

The tokenizer's evidence gives the problem itself at high confidence; another library's gives the
`elsewhere` problem (info: "a PyO3 borrow error in LIBRARY — not the tokenizer race"); nothing at all gives
the problem at the context's `bare` confidence (low). Each decision says its evidence in words. A line with
nothing above it waits until `reach` more lines came (or the input ends) before it is decided.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field, replace

from borrowguard.knowledge import Confidence, KnowledgeBase
from borrowguard.knowledge.signatures import Context, Signature
from borrowguard.scan.model import Hit, excerpt
from borrowguard.scan.tracebacks import Window

MAX_EVIDENCE = 64
"""Evidence lines remembered per source (the nearest ones matter)."""
MAX_UNDECIDED = 64
IDLE_S = 2.0
"""A followed log quiet this long after a waiting line: it is decided by what came so far. The evidence that
decides a line (its JSON stack trace, the traceback lines of its record) is written with it, not seconds
later; waiting for `reach` more lines of a quiet server would report it minutes late, or never."""
BARE = "no context: a bare line (PyO3 raises these words for a borrow conflict on any Rust-backed object)"


@dataclass(frozen=True)
class Evidence:
    line_no: int
    process: str | None
    library: str | None
    """None: the tokenizer's evidence; else the other library it names."""
    text: str


@dataclass
class Undecided:
    hit: Hit
    signature: Signature
    since: float = 0.0
    """When it was read (time.monotonic()): a followed log that goes quiet decides it after IDLE_S."""


@dataclass
class Attribution:
    """One source's evidence lines and the matched lines still waiting for theirs."""

    evidence: deque[Evidence] = field(default_factory=lambda: deque(maxlen=MAX_EVIDENCE))
    undecided: list[Undecided] = field(default_factory=list)


def line_evidence(ctx: Context, text: str, *, code: bool = False) -> tuple[str | None, str] | None:
    """(library or None for the tokenizer, what was seen) when `text` (a frame, a source line when `code`,
    a log line) names the tokenizer or another library."""
    literal = ctx.tokenizer_in(text)
    if literal is not None:
        return None, literal
    if code and ctx.code is not None:
        m = ctx.code.search(text)
        if m is not None:
            return None, m.group(0)
    library = ctx.library(text)
    if library is not None:
        return library, library
    return None


def frame_evidence(ctx: Context, frame: str, text: str) -> tuple[str | None, str] | None:
    """`line_evidence` of a source line `text` under its frame line `frame`: a call that only the generic
    code regex names (`.encode(`, `.tokenize(`, no tokenizer in the words) made in another package's code
    (a site-packages folder, no tokenizer literal in the frame) is that package's Rust object, not the
    tokenizer: tiktoken's `self._core_bpe.encode(...)`, a text library's `self._native.tokenize(...)`."""
    seen = line_evidence(ctx, text, code=True)
    if seen is None or seen[0] is not None or ctx.tokenizer_in(text) is not None or _TOKENIZER_WORD.search(text):
        return seen
    if ctx.tokenizer_in(frame) is not None:
        return seen
    library = _site_package(frame)
    return seen if library is None else (library, excerpt(text.strip(), 80))


def _site_package(frame: str) -> str | None:
    """The site-packages package a frame line's file is in, if any."""
    m = _FRAME_PATH.search(frame)
    if m is None:
        return None
    parts = [p for p in re.split(r"[/\\]", m.group(1)) if p]
    where = next((i for i, p in enumerate(parts) if p in _PACKAGES), None)
    if where is None or where + 1 >= len(parts):
        return None
    return parts[where + 1].removesuffix(".py")


def decide(kb: KnowledgeBase, hit: Hit, sig: Signature, evidence: tuple[str | None, str] | None, where: str) -> Hit:
    """The hit as its evidence makes it: the problem (high), another library's (`elsewhere`), or bare."""
    ctx = sig.context
    assert ctx is not None
    if evidence is None:
        return replace(hit, confidence=ctx.bare, evidence=BARE)
    library, seen = evidence
    if library is None:
        return replace(hit, confidence=Confidence.HIGH, evidence=excerpt(f"tokenizer context {where}: {seen}", 200))
    other = kb.get(ctx.elsewhere or "")
    if other is None:
        return replace(hit, confidence=ctx.bare, evidence=BARE)
    return replace(
        hit,
        id=other.id,
        severity=other.severity,
        detail=library,
        confidence=Confidence.HIGH if where in (IN_TRACEBACK, ON_LINE) else Confidence.MEDIUM,
        evidence=excerpt(f"a PyO3 borrow error in {library} — not the tokenizer race ({seen} {where})", 200),
    )


IN_TRACEBACK = "in its traceback"
ON_LINE = "on its own line"
BY_INNERMOST = "in its traceback's innermost frame, which is no tokenizer's"

_FRAME_PATH = re.compile(r'File "([^"<>\n]{1,1024})", line')
_PACKAGES = ("site-packages", "dist-packages")
_TOKENIZER_WORD = re.compile(r"[Tt]okeni[sz]er|\btok\b")
_NAMED_OBJECT = re.compile(r"`(?P<package>[A-Za-z_][A-Za-z0-9_]{0,40})(?:\.[A-Za-z_][A-Za-z0-9_]{0,40}){0,3}\.[A-Z][A-Za-z0-9_]{0,60}`")


def in_traceback(win: Window | None) -> tuple[tuple[str | None, str] | None, str]:
    """The evidence of the traceback that a matched exception line ends: the innermost frame or source line
    naming the tokenizer or another library, else the innermost call itself when it is not the tokenizer's.

    PyO3 raises a borrow error in the frame that calls the Rust method, so a whole traceback whose innermost
    frame neither is the tokenizer's nor calls it had its conflict in whatever that frame calls: another
    extension, named by the frame's package (the site-packages one, else the file with its folder). Returns
    (evidence or None, where it was seen)."""
    if win is not None and win.evidence is not None and win.by_package:
        return win.evidence, BY_INNERMOST
    if win is None or win.evidence is not None:
        return (win.evidence if win is not None else None), IN_TRACEBACK
    code = win.last_line.strip()
    if win.last_line == win.last_frame or "(" not in code or code.startswith(("raise", "await", "return await")):
        return None, IN_TRACEBACK  # no source line (or a re-raise): where the error came from is not shown
    if _TOKENIZER_WORD.search(code):
        return None, IN_TRACEBACK  # it hands the tokenizer to the call (a decode stream's step(tokenizer, ...))
    m = _FRAME_PATH.search(win.last_frame)
    if m is None:
        return None, IN_TRACEBACK
    parts = [p for p in re.split(r"[/\\]", m.group(1)) if p]
    where = next((i for i, p in enumerate(parts) if p in _PACKAGES), None)
    if where is not None and where + 1 < len(parts):
        library = parts[where + 1].removesuffix(".py")
    else:
        library = "/".join(parts[-2:]).removesuffix(".py")
    return (library, excerpt(code, 80)), BY_INNERMOST


def attribute(
    kb: KnowledgeBase, att: Attribution, sig: Signature, hit: Hit, message: str,
    traced: tuple[str | None, str] | None, where: str = IN_TRACEBACK,
) -> Hit | None:
    """`hit` decided by its context, or None when it must wait for the lines below (it then waits).
    `traced` is the evidence of the traceback the line ends, seen `where` (see in_traceback)."""
    ctx = sig.context
    assert ctx is not None
    if traced is not None:
        return decide(kb, hit, sig, traced, where)
    seen = line_evidence(ctx, message)
    if seen is None and ctx.answer is not None:
        m = ctx.answer.search(message)
        seen = (None, f"an HTTP answer ({m.group(0).strip()})") if m is not None else None
    if seen is None:
        seen = named_object(ctx, message)
    if seen is not None:
        return decide(kb, hit, sig, seen, ON_LINE)
    ev = near(att, hit.process, hit.line_no - 1, ctx.reach)
    if ev is not None:
        return decide(kb, hit, sig, (ev.library, ev.text), above(ev, hit.line_no))
    wait(att, hit, sig)
    return None


def named_object(ctx: Context, message: str) -> tuple[str | None, str] | None:
    """The object a report names as the one shared (`` `bauplan.Client` ``, `` `polars.DataFrame` ``: a
    module-qualified class in backticks): its package is whose borrow error it is, unless it is the tokenizer's."""
    m = _NAMED_OBJECT.search(message)
    if m is None:
        return None
    if ctx.tokenizer_in(m.group(0)) is not None or _TOKENIZER_WORD.search(m.group(0)):
        return None, m.group(0)
    return m["package"], f"the object it names: {m.group(0)}"


def near(att: Attribution, process: str | None, line_no: int, reach: int) -> Evidence | None:
    """The nearest evidence above `line_no` of the same process, within `reach` lines."""
    for ev in reversed(att.evidence):
        if line_no - ev.line_no > reach:
            return None
        if ev.process == process and ev.line_no <= line_no:
            return ev
    return None


def settle(
    kb: KnowledgeBase, att: Attribution, line_no: int, *, end: bool = False, read_before: float | None = None
) -> list[Hit]:
    """The waiting lines that are decided now: by evidence that came after them, or because `reach` lines
    passed (or the input ended, or, when following, they were read before `read_before`) without any."""
    done: list[Hit] = []
    keep: list[Undecided] = []
    for u in att.undecided:
        ctx = u.signature.context
        assert ctx is not None
        after = next(
            (e for e in att.evidence if e.process == u.hit.process and 0 < e.line_no - u.hit.line_no <= ctx.reach),
            None,
        )
        if after is not None:
            done.append(decide(kb, u.hit, u.signature, (after.library, after.text), _lines_away(after, u.hit)))
        elif end or line_no - u.hit.line_no > ctx.reach or (read_before is not None and u.since < read_before):
            done.append(decide(kb, u.hit, u.signature, None, ""))
        else:
            keep.append(u)
    att.undecided = keep
    return done


def pending(kb: KnowledgeBase, att: Attribution) -> list[Hit]:
    """The waiting lines as they would be decided if the input ended now (nothing is changed)."""
    copy = Attribution(deque(att.evidence, maxlen=MAX_EVIDENCE), list(att.undecided))
    return settle(kb, copy, 0, end=True)


def wait(att: Attribution, hit: Hit, sig: Signature) -> None:
    if len(att.undecided) < MAX_UNDECIDED:
        att.undecided.append(Undecided(hit, sig, time.monotonic()))


def _lines_away(ev: Evidence, hit: Hit) -> str:
    d = abs(ev.line_no - hit.line_no)
    return f"{d} line{'s' if d != 1 else ''} {'below' if ev.line_no > hit.line_no else 'above'}"


def above(ev: Evidence, line_no: int) -> str:
    d = line_no - ev.line_no
    return ON_LINE if d == 0 else f"{d} line{'s' if d != 1 else ''} above"
