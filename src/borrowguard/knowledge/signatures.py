"""Compile and validate the `[[problem.signature]]` tables of the knowledge base (used by `borrowguard scan`).

A signature table has these fields (regular expressions are Python's; a list may be one string):

    message = [...]    a log line whose message matches any of these is an occurrence
    frames  = [...]    traceback lines that match these in order, within one traceback, are an occurrence;
                       this catches excerpts cut off before the exception line
    raises  = [...]    exception lines that, after `frames`, confirm the problem (besides `message`);
                       a traceback whose exception line matches neither is not this problem
    exclude = [...]    near misses: a line (or a traceback's exception line) matching any never counts
    stall   = [...]    a hang: the log ends (within `stall_lines` lines) after a line matching one of these,
    resume  = [...]    with no line matching `resume` after it; one occurrence, at the stall line
    anchors = [...]    literals (not regexes), required: every line that matches a `message`, the first
                       `frames`, a `stall` or a `resume` regex contains at least one of them
    confidence = "high" | "medium" | "low"   of an occurrence confirmed by its line (default high)
    when_cut   = "medium" | "low" | "none"   of a `frames` occurrence cut before its exception line
                                             (default: one step below `confidence`; "none": not counted)
    detail     = "..."                       a fixed detail for every occurrence (else the regex's
                                             named group `detail`, counted per value)
    startup    = "ignore"                    occurrences while the server is starting up do not count

The anchors are what lets the scanner read gigabytes: it looks for them with fast substring search and
parses only the lines that contain one. The loader checks that they are there and usable; the test suite
checks, on every fixture log, that no line matches a regex without containing one of its anchors. A
signature whose anchors are short (likely common, like `" 4` where `HTTP/` is on every access-log line)
and whose regexes only use ASCII literals and classes is searched as a whole instead (a probe): the same
bytes match, at regex speed. Case-insensitive and nested unbounded patterns are refused (they defeat the
anchors or backtrack catastrophically on hostile lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, AnyStr

from borrowguard.knowledge.loader import KnowledgeBase, KnowledgeError
from borrowguard.knowledge.model import Confidence, Severity

PATTERN_FIELDS = ("message", "frames", "raises", "exclude", "stall", "resume")
FIELDS = (
    *PATTERN_FIELDS, "anchors", "confidence", "when_cut", "stall_lines", "detail", "startup", "cut_inside", "says",
    "context",
)
CONTEXT_FIELDS = ("tokenizer", "code", "answer", "others", "elsewhere", "bare", "reach", "quoted")
MAX_REACH = 2000
MIN_ANCHOR = 3
PROBE_BELOW = 8
"""An anchor shorter than this is presumed common in healthy logs; see the module doc."""
MAX_PATTERN = 400
"""Longer patterns are refused: real signatures are one short phrase; a huge one is a mistake or an attack."""
DEFAULT_STALL_LINES = 50


@dataclass(frozen=True)
class Context:
    """Whose error a matched line is, decided by what is around it (see rules.toml's context tables)."""

    tokenizer: tuple[str, ...]
    """Literals that say "the problem itself" in its traceback, its line or the lines around it."""
    code: re.Pattern[str] | None
    """A quoted source line of its traceback that calls the tokenizer."""
    answer: re.Pattern[str] | None
    """Its own line is an HTTP answer carrying the error."""
    others: tuple[tuple[str, tuple[str, ...]], ...]
    """(library, literals): the context names another library: not this problem but `elsewhere`."""
    elsewhere: str | None
    bare: Confidence
    """The confidence of a line with no context at all."""
    reach: int
    quoted: tuple[re.Pattern[str], ...] = ()
    """Source code quoting the words: not an occurrence."""

    def literals(self) -> tuple[str, ...]:
        return (*self.tokenizer, *(a for _, names in self.others for a in names))

    def library(self, text: str) -> str | None:
        """The other library `text` names, if any."""
        for name, literals in self.others:
            if any(a in text for a in literals):
                return name
        return None

    def tokenizer_in(self, text: str) -> str | None:
        """The tokenizer literal `text` holds, if any."""
        return next((a for a in self.tokenizer if a in text), None)


@dataclass(frozen=True)
class Signature:
    """One compiled `[[problem.signature]]` table of problem `problem_id`."""

    problem_id: str
    severity: Severity
    index: int
    message: tuple[re.Pattern[str], ...] = ()
    frames: tuple[re.Pattern[str], ...] = ()
    raises: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    stall: tuple[re.Pattern[str], ...] = ()
    resume: tuple[re.Pattern[str], ...] = ()
    anchors: tuple[str, ...] = ()
    """Literals of which every line that can start (or, for stalls, resume) an occurrence contains one."""
    confidence: Confidence = Confidence.HIGH
    when_cut: Confidence | None = Confidence.MEDIUM
    stall_lines: int = DEFAULT_STALL_LINES
    detail: str | None = None
    ignore_startup: bool = False
    probes: tuple[str, ...] = ()
    """Regexes searched over raw bytes instead of their (short) anchors when no multi-pattern matcher is
    installed; `find_anchors` is then empty."""
    find_anchors: tuple[str, ...] = ()
    cut_inside: re.Pattern[str] | None = None
    """With `frames`: a cut traceback counts only when its last frame matches."""
    says: str | None = None
    """The evidence of an occurrence, in words."""
    context: Context | None = None

    def excluded(self, text: str) -> bool:
        return any(p.search(text) for p in self.exclude)

    def starters(self) -> tuple[re.Pattern[str], ...]:
        """The regexes whose lines the anchors must cover."""
        return (*self.message, *self.frames[:1], *self.stall, *self.resume)


def compile_signatures(kb: KnowledgeBase) -> tuple[Signature, ...]:
    """Every signature of every problem in `kb`, compiled; KnowledgeError names the rule and field."""
    signatures = tuple(
        compile_signature(problem.id, problem.severity, raw, index)
        for problem in kb
        for index, raw in enumerate(problem.signatures)
    )
    for sig in signatures:
        if sig.context is not None and sig.context.elsewhere is not None and sig.context.elsewhere not in kb:
            raise KnowledgeError(
                f"rule {sig.problem_id!r}: signature #{sig.index + 1}: field 'context.elsewhere' names unknown rule "
                f"{sig.context.elsewhere!r}"
            )
    return signatures


def compile_signature(problem_id: str, severity: str, raw: Mapping[str, Any], index: int = 0) -> Signature:
    where = f"rule {problem_id!r}: signature #{index + 1}"
    if not isinstance(raw, Mapping):
        raise KnowledgeError(f"{where}: must be a table")
    for name in raw:
        if name not in FIELDS:
            raise KnowledgeError(f"{where}: field {name!r} is not a known field (known: {', '.join(FIELDS)})")
    fields = {name: _patterns(raw.get(name, ()), f"{where}: field {name!r}") for name in PATTERN_FIELDS}
    if not (fields["message"] or fields["frames"] or fields["stall"]):
        raise KnowledgeError(f"{where}: needs 'message', 'frames' or 'stall'")
    if fields["raises"] and not fields["frames"]:
        raise KnowledgeError(f"{where}: field 'raises' only applies together with 'frames'")
    if fields["resume"] and not fields["stall"]:
        raise KnowledgeError(f"{where}: field 'resume' only applies together with 'stall'")
    anchors = _declared_anchors(raw.get("anchors"), f"{where}: field 'anchors'")
    cut_inside = _patterns(raw.get("cut_inside", ()), f"{where}: field 'cut_inside'")
    if cut_inside and not fields["frames"]:
        raise KnowledgeError(f"{where}: field 'cut_inside' only applies together with 'frames'")
    context = _context(raw.get("context"), f"{where}: field 'context'") if "context" in raw else None
    if context is not None and not fields["message"]:
        raise KnowledgeError(f"{where}: field 'context' only applies together with 'message'")
    confidence = _confidence(raw.get("confidence", "high"), f"{where}: field 'confidence'")
    when_cut = _when_cut(raw.get("when_cut"), confidence, f"{where}: field 'when_cut'")
    starters = (*fields["message"], *fields["frames"][:1], *fields["stall"], *fields["resume"])
    probe = min(len(a) for a in anchors) < PROBE_BELOW and all(bytes_safe(p.pattern) for p in starters)
    return Signature(
        problem_id=problem_id,
        severity=Severity(severity),
        index=index,
        anchors=anchors,
        confidence=confidence,
        when_cut=when_cut,
        stall_lines=_positive_int(raw.get("stall_lines", DEFAULT_STALL_LINES), f"{where}: field 'stall_lines'"),
        detail=_optional_text(raw.get("detail"), f"{where}: field 'detail'"),
        ignore_startup=_startup(raw.get("startup"), f"{where}: field 'startup'"),
        probes=tuple(p.pattern for p in starters) if probe else (),
        find_anchors=() if probe else anchors,
        cut_inside=cut_inside[0] if cut_inside else None,
        says=_optional_text(raw.get("says"), f"{where}: field 'says'"),
        context=context,
        **fields,
    )


def _context(value: Any, where: str) -> Context:
    if not isinstance(value, Mapping):
        raise KnowledgeError(f"{where} must be a table")
    for name in value:
        if name not in CONTEXT_FIELDS:
            raise KnowledgeError(f"{where}.{name} is not a known field (known: {', '.join(CONTEXT_FIELDS)})")
    tokenizer = _declared_anchors(value.get("tokenizer"), f"{where}.tokenizer")
    others_raw = value.get("others", {})
    if not isinstance(others_raw, Mapping):
        raise KnowledgeError(f"{where}.others must be a table of LIBRARY = [literal...]")
    others = tuple(
        (str(name), _declared_anchors(literals, f"{where}.others.{name}")) for name, literals in others_raw.items()
    )
    elsewhere = value.get("elsewhere")
    if others and not (isinstance(elsewhere, str) and elsewhere):
        raise KnowledgeError(f"{where}.elsewhere must name the problem an other library's error is")
    code = _patterns(value.get("code", ()), f"{where}.code")
    answer = _patterns(value.get("answer", ()), f"{where}.answer")
    return Context(
        tokenizer=tokenizer,
        code=code[0] if code else None,
        answer=answer[0] if answer else None,
        others=others,
        elsewhere=elsewhere if isinstance(elsewhere, str) else None,
        bare=_confidence(value.get("bare", "low"), f"{where}.bare"),
        reach=_reach(value.get("reach", 200), f"{where}.reach"),
        quoted=_patterns(value.get("quoted", ()), f"{where}.quoted"),
    )


def _reach(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_REACH:
        raise KnowledgeError(f"{where} must be a whole number of lines from 0 to {MAX_REACH}")
    return value


def unmatched_lines(sig: Signature, lines: Iterable[str]) -> Iterator[str]:
    """Lines that one of `sig`'s starting regexes matches although they contain none of its anchors: each
    one is a line the bulk scan would skip, so the anchors are wrong (the test suite runs this on every
    fixture log)."""
    starters = sig.starters()
    for line in lines:
        if any(p.search(line) for p in starters) and not any(a in line for a in sig.anchors):
            yield line


def minimal_anchors(anchors: Iterable[AnyStr]) -> tuple[AnyStr, ...]:
    """The anchors without those containing another one (a line containing the longer also contains the
    shorter), so each remaining one costs one substring search per chunk."""
    unique = sorted(set(anchors), key=len)
    kept: list[AnyStr] = []
    for anchor in unique:
        if not any(k in anchor for k in kept):
            kept.append(anchor)
    return tuple(kept)


def _declared_anchors(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not value:
        raise KnowledgeError(f"{where} is required: the literals every matching line contains")
    for anchor in value:
        if not isinstance(anchor, str) or len(anchor) < MIN_ANCHOR or "\n" in anchor:
            raise KnowledgeError(f"{where} must be a list of literal strings of {MIN_ANCHOR}+ characters")
    return tuple(dict.fromkeys(value))


def _confidence(value: Any, where: str) -> Confidence:
    try:
        return Confidence(value)
    except ValueError:
        raise KnowledgeError(f"{where} must be one of {', '.join(c.value for c in Confidence)}") from None


def _when_cut(value: Any, confidence: Confidence, where: str) -> Confidence | None:
    if value is None:
        return confidence.lower()
    if value == "none":
        return None
    return _confidence(value, where)


def _positive_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 100_000:
        raise KnowledgeError(f"{where} must be a whole number of lines from 1 to 100000")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 200):
        raise KnowledgeError(f"{where} must be a short non-empty string")
    return value


def _startup(value: Any, where: str) -> bool:
    if value not in (None, "ignore", "count"):
        raise KnowledgeError(f'{where} must be "ignore" or "count"')
    return value == "ignore"


def _patterns(value: Any, where: str) -> tuple[re.Pattern[str], ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) and v for v in value):
        raise KnowledgeError(f"{where} must be a list of non-empty strings (regular expressions)")
    compiled = []
    for i, text in enumerate(value):
        item = f"{where} item {i + 1}"
        if len(text) > MAX_PATTERN:
            raise KnowledgeError(f"{item} is longer than {MAX_PATTERN} characters")
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise KnowledgeError(f"{item} ({text!r}) is not a valid regular expression: {exc}") from None
        if pattern.flags & re.IGNORECASE or "(?i" in text:
            raise KnowledgeError(f"{item} ({text!r}) is case-insensitive; spell the case out")
        if nested_unbounded(text):
            raise KnowledgeError(
                f"{item} ({text!r}) nests unbounded repetitions, which can backtrack catastrophically on "
                "hostile lines; bound the inner one (e.g. {0,64})"
            )
        compiled.append(pattern)
    return tuple(compiled)


# ---- a small reading of regex syntax (no CPython internals) --------------------------------------
# Enough to tell two things about a pattern that already compiled: whether an unbounded repetition
# sits inside another one, and whether the pattern matches bytes exactly as it matches text.

_QUANT = re.compile(r"[*+?]|\{\d*(?:,\d*)?\}")
_CLASS = re.compile(r"\[\^?\]?(?:\\.|[^\]\\])*\]")


def _tokens(pattern: str) -> Iterator[tuple[str, str]]:
    """(kind, text): kinds lit, esc, class, open, close, quant, alt, dot, edge."""
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            yield "esc", pattern[i : i + 2]
            i += 2
        elif ch == "[":
            m = _CLASS.match(pattern, i)
            end = m.end() if m else n
            yield "class", pattern[i:end]
            i = end
        elif ch == "(":
            m = re.compile(r"\((?:\?(?:P<\w+>|[:=!>]|<[=!]|[a-zA-Z]+[:)]))?").match(pattern, i)
            end = m.end() if m else i + 1
            yield "open", pattern[i:end]
            i = end
        elif ch in "*+?{":
            m = _QUANT.match(pattern, i)
            end = m.end() if m else i + 1
            if end < n and pattern[end] in "?+":  # lazy or possessive
                end += 1
            yield ("quant" if m else "lit"), pattern[i:end]
            i = end
        else:
            kind = {")": "close", "|": "alt", ".": "dot", "^": "edge", "$": "edge"}.get(ch, "lit")
            yield kind, ch
            i += 1


def _unbounded(quant: str) -> bool:
    q = quant.rstrip("?+") or quant
    return q in ("*", "+") or (q.startswith("{") and q.rstrip("}").endswith(","))


def nested_unbounded(pattern: str) -> bool:
    """True when an unbounded repetition (`*`, `+`, `{n,}`) applies to a group that itself contains one."""
    stack = [False]  # per open group: does it contain an unbounded repetition?
    last_group: bool | None = None  # the group just closed, while a quantifier may still follow
    for kind, text in _tokens(pattern):
        if kind == "quant":
            if _unbounded(text):
                if last_group:
                    return True
                stack[-1] = True
            last_group = None
            continue
        last_group = None
        if kind == "open":
            stack.append(False)
        elif kind == "close" and len(stack) > 1:
            inner = stack.pop()
            stack[-1] = stack[-1] or inner
            last_group = inner
    return False


def bytes_safe(pattern: str) -> bool:
    """True when the regex matches the UTF-8 bytes of any text it matches: ASCII literals, classes of
    ASCII literals and ranges, plain and named groups, bounded or unbounded repeats; no `.`, no `\\d`-style
    classes, no `^`/`$`/`\\b`, no negated classes; and it starts with a literal, so that the search skips
    ahead by that byte."""
    tokens = list(_tokens(pattern))
    if not tokens or tokens[0][0] != "lit":
        return False
    for kind, text in tokens:
        if not text.isascii() or kind in ("dot", "edge"):
            return False
        if kind == "esc" and text[1:].isalnum():
            return False
        if kind == "class" and (text.startswith("[^") or re.search(r"\\[A-Za-z0-9]", text)):
            return False
        if kind == "open" and text not in ("(", "(?:") and not text.startswith("(?P<"):
            return False
    return True
