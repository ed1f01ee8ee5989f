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
    cut_inside = regex                       with `frames`: a cut traceback counts only when its last
                                             frame matches this
    cut_not_at = regex                       with `frames`: a cut traceback whose last line (its innermost
                                             frame or the source line under it) matches this does not
                                             count: the paste stopped at a call where the problem is not
                                             raised

The anchors are what lets the scanner read gigabytes: it looks for them with fast substring search and
parses only the lines that contain one. The loader checks that they are there and usable; the test suite
checks, on every fixture log, that no line matches a regex without containing one of its anchors. A
signature whose anchors are short (likely common, like `" 4` where `HTTP/` is on every access-log line)
and whose regexes only use ASCII literals and classes is searched as a whole instead (a probe): the same
bytes match, at regex speed. Case-insensitive and nested unbounded patterns are refused (they defeat the
anchors or backtrack catastrophically on hostile lines).

Repetition is bounded as RE2 bounds it (Loki's Go regexp and Vector's Rust regex have the same limits): no
count above 1000, no nested counts whose product is above 1000. A repetition that varies in count may not
repeat something that varies as well, nor alternatives that can start alike: Python's backtracking tries
every way to split the line between them. And each pattern has a per-line budget: an upper bound on the
ways it can be tried on one 64 KiB line (positions times paths at each) must stay under LINE_BUDGET, which
in practice means every repetition is bounded (`\\S{1,128}`, not `\\S+` or `.*`), as the bundled ones are.
The loader checks every user pattern this way when it reads the file, for every tool. With google-re2 installed (the dev extra) each pattern that `rules export` can write
is also compiled by RE2 as written for Loki and Vector; without it, the limits above (RE2's own) decide
alone, so a rules file is accepted or refused the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, AnyStr

from borrowguard.knowledge.loader import KnowledgeBase, KnowledgeError
from borrowguard.knowledge.model import Confidence, Severity, listed

PATTERN_FIELDS = ("message", "frames", "raises", "exclude", "stall", "resume")
FIELDS = (
    *PATTERN_FIELDS, "anchors", "confidence", "when_cut", "stall_lines", "detail", "startup", "cut_inside",
    "cut_not_at", "says", "context",
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
    cut_not_at: re.Pattern[str] | None = None
    """With `frames`: a cut traceback whose last line (frame or source line) matches does not count."""
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
    cut_not_at = _patterns(raw.get("cut_not_at", ()), f"{where}: field 'cut_not_at'")
    for name, given in (("cut_inside", cut_inside), ("cut_not_at", cut_not_at)):
        if given and not fields["frames"]:
            raise KnowledgeError(f"{where}: field {name!r} only applies together with 'frames'")
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
        cut_not_at=cut_not_at[0] if cut_not_at else None,
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


def check_patterns(raw: Mapping[str, Any], where: str) -> None:
    """The regexes of one raw signature table, as `compile_signature` checks them; KnowledgeError if one
    is refused. The loader runs this on a user's rules file."""
    for name in PATTERN_FIELDS:
        if name in raw:
            _patterns(raw[name], f"{where}: field {name!r}")
    for name in ("cut_inside", "cut_not_at"):
        if name in raw:
            _patterns(raw[name], f"{where}: field {name!r}")
    context = raw.get("context")
    if isinstance(context, Mapping):
        for name in ("code", "answer", "quoted"):
            if name in context:
                _patterns(context[name], f"{where}: field 'context.{name}'")


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
    value = listed(value)
    if not isinstance(value, Sequence) or not value:
        raise KnowledgeError(f"{where} is required: the literals every matching line contains")
    for anchor in value:
        # the anchors are searched for as UTF-8 bytes: two CJK characters (six bytes) are as rare as an English word
        if not isinstance(anchor, str) or len(anchor.encode()) < MIN_ANCHOR or "\n" in anchor:
            raise KnowledgeError(f"{where} must be a list of literal strings of {MIN_ANCHOR}+ bytes (UTF-8)")
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
    value = listed(value)
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
        problem = repetition_problem(text) or re2_problem(text)
        if problem:
            raise KnowledgeError(f"{item} ({text!r}) {problem}")
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


LINE = 64 * 1024
"""The longest message scan hands to a regex (scan cuts longer lines to their two ends; a test checks)."""
LINE_BUDGET = 2**27
"""Per line, at most this many ways to try a pattern (positions times paths at each): about a second of
Python's `re` at worst, whatever the line holds. The bundled patterns stay below 2**24."""
MAX_REPEAT = 1000
"""RE2's limit (Loki's Go regexp and Vector's Rust regex have the same one): on one count, and on the
product of the counts of nested repetitions, `(?:(?:ab{10}){10}){10}` being 1000."""


@dataclass
class _Group:
    """What `repetition_problem` knows of a group (or of one atom) once read."""

    varies: bool = False
    """It contains a repetition whose count varies."""
    product: int = 1
    """The largest product of nested explicit counts inside."""
    firsts: list[str | None] = field(default_factory=lambda: [None])
    """Each alternative's first token."""
    alternatives: bool = False
    paths: float = 1.0
    """An upper bound on the ways it can match at one position (a closed group: all its alternatives)."""
    done: float = 0.0
    """While open: the paths of its alternatives before the current one (whose are `paths`)."""
    best: float = 0.0
    """While open: the most paths of one of those alternatives."""


def _count(quant: str) -> tuple[int, int | None]:
    q = quant[:-1] if len(quant) > 1 and quant[-1] in "?+" else quant  # lazy or possessive
    if q in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
    low, comma, high = q[1:-1].partition(",")
    lo = int(low or 0)
    return lo, (int(high) if high else None) if comma else lo


def repetition_problem(pattern: str) -> str | None:
    """Why the pattern's repetitions are refused, or None: a count above MAX_REPEAT, nested counts whose
    product is above it (both: RE2 refuses them, and Python's backtracking on them is unbounded), or a
    repetition that varies in count (`*`, `+`, `{1,100}`) around another that varies, or around
    alternatives that can start alike: `X(?:a{1,100}){1,100}Y` tries every way to split a run of `a`s
    (hours on one 3 KB line), `(?:a|ab)*` every way to read one."""
    stack = [_Group()]
    last: _Group | None = None  # the atom a quantifier would apply to
    for kind, text in _tokens(pattern):
        top = stack[-1]
        if kind == "quant" and last is not None:
            low, high = _count(text)
            count = high if high is not None else low
            if count > MAX_REPEAT:
                return f"repeats {count} times; RE2 (Loki, Vector) refuses counts above {MAX_REPEAT}: lower it"
            if text[:1] == "{":
                last.product *= max(count, 1)
            if last.product > MAX_REPEAT:
                return (f"nests repetitions {last.product} times over; RE2 (Loki, Vector) refuses more than "
                        f"{MAX_REPEAT} (the product of nested counts): lower the counts")
            before = last.paths  # already counted in `top` (once, as if not repeated)
            last.paths = _repeat_paths(before, low, high)
            varies = high is None or (low < high and high >= 2)
            if varies and last.varies:
                return ("repeats a varying number of times something that itself varies in length, which "
                        "backtracks without bound on hostile lines; make one count fixed, e.g. a{3} or (?:ab){1,5}")
            if varies and last.alternatives and not _distinct(last.firsts):
                return ("repeats alternatives that can start with the same character, which backtracks "
                        "without bound on hostile lines; make each alternative start differently")
            last.varies = last.varies or high is None or low < high
            top.varies = top.varies or last.varies
            top.product = max(top.product, last.product)
            top.paths *= last.paths / before
            last = None
            continue
        if kind == "open":
            stack.append(_Group())
            last = None
            continue
        if kind == "alt":
            top.alternatives = True
            top.firsts.append(None)
            top.done, top.best, top.paths = top.done + top.paths, max(top.best, top.paths), 1.0
            last = None
            continue
        if kind == "close" and len(stack) > 1:
            last = stack.pop()
            # alternatives that start differently: at most one of them goes on at a position
            last.paths = max(last.best, last.paths) if _distinct(last.firsts) else last.done + last.paths
            stack[-1].varies = stack[-1].varies or last.varies
            stack[-1].product = max(stack[-1].product, last.product)
            _first(stack[-1], f"({id(last)}")
            stack[-1].paths *= last.paths  # once; a quantifier after it scales this
            continue
        _first(top, text if kind in ("lit", "esc") else f"{kind}:{text}")
        last = _Group()
    top = stack[0]
    cost = LINE * (max(top.best, top.paths) if _distinct(top.firsts) else top.done + top.paths)
    if cost > LINE_BUDGET:
        return (f"can take about {cost:.0e} steps on one {LINE // 1024} KiB line (the budget is {LINE_BUDGET:.0e}): "
                "bound every repetition tightly, e.g. \\S{1,128} rather than \\S+ or .*")
    return None


def _repeat_paths(paths: float, low: int, high: int | None) -> float:
    # each count from low to high is one more way to match, each iteration multiplies by the atom's ways
    top = LINE if high is None else min(high, LINE)
    if paths <= 1.0:
        return float(max(top - low + 1, 1))
    return min(paths ** min(top, 64), 1e300) * max(top - low + 1, 1)


def _first(group: _Group, token: str) -> None:
    if group.firsts[-1] is None:
        group.firsts[-1] = token


def _distinct(firsts: list[str | None]) -> bool:
    # every alternative starts with a literal character of its own (an escape of punctuation included)
    literal = [f for f in firsts if f is not None and len(f) <= 2 and (len(f) == 1 or not f[1:].isalnum())]
    return len(literal) == len(firsts) and len({f[-1] for f in literal}) == len(literal)


def re2_problem(pattern: str) -> str | None:
    """What RE2 (google-re2, when installed) says about the pattern as `rules export` writes it for Loki
    and Vector, or None. A pattern outside the export's whitelist is never exported: RE2 has no say.
    Without google-re2 the limits above are the check (they are RE2's own); with it, RE2 has the last word."""
    try:
        import re2  # type: ignore[import-not-found]  # google-re2: the dev extra, optional at run time
    except ImportError:
        return None
    from borrowguard.knowledge.export.dialects import Unsupported, to_re2  # here: export imports the loader

    try:
        rewritten = to_re2(pattern)
    except Unsupported:
        return None
    options = re2.Options()
    options.log_errors = False  # the refusal is ours to report, once
    try:
        re2.compile(rewritten, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        return f"is refused by RE2 (Loki, Vector), as rules export writes it: {reason}"
    return None


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
