"""Compile and validate the `[[problem.signature]]` tables of the knowledge base (used by `borrowguard scan`).

A signature table has these fields (each a list of Python regular expressions, or one string):

    message = [...]   a log line whose message matches any of these is an occurrence
    frames  = [...]   traceback lines that match these in order, within one traceback, are an occurrence;
                      this catches excerpts cut off before the exception line
    raises  = [...]   exception lines that, after `frames`, confirm the problem (besides `message`);
                      a traceback whose exception line matches neither is not this problem
    exclude = [...]   near misses: a line (or a traceback's exception line) matching any never counts
    anchors = [...]   optional literals (not regexes) that every line matching `message` or the first
                      `frames` regex contains; checked. Shared anchors make the bulk scan faster

A named group `detail` in a `message` regex is counted per value (e.g. the HTTP status).

Every `message` regex and the first `frames` regex must contain a literal of at least 4 characters that any
match includes (its anchor): the scanner looks for anchors with fast substring search and runs the regexes
only on lines that contain one, which is what lets it read gigabytes of log. A regex whose anchor is short
(likely common, like `HTTP/` on every access-log line) and that only uses ASCII literals and classes is
searched as a whole instead (a probe): the same bytes match, at regex speed, without visiting every line.
Case-insensitive and nested unbounded patterns are refused (they defeat the anchors or backtrack
catastrophically on hostile lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, AnyStr

from borrowguard.knowledge.loader import KnowledgeBase, KnowledgeError

try:  # the regex parser moved in 3.11; both are stdlib
    import re._parser as _sre_parse  # type: ignore[import-not-found]
    from re._constants import MAXREPEAT as _MAXREPEAT  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]
    from sre_constants import MAXREPEAT as _MAXREPEAT  # type: ignore[no-redef]

FIELDS = ("message", "frames", "raises", "exclude", "anchors")
MIN_ANCHOR = 4
MIN_DECLARED = 3
"""Declared anchors may be shorter: the author knows `" 4` is rare in logs where `HTTP/` is everywhere."""
PROBE_BELOW = 8
"""An anchor shorter than this is presumed common in healthy logs; see `probes`."""
MAX_PATTERN = 400
"""Longer patterns are refused: real signatures are one short phrase; a huge one is a mistake or an attack."""


@dataclass(frozen=True)
class Signature:
    """One compiled `[[problem.signature]]` table of problem `problem_id`."""

    problem_id: str
    severity: str
    index: int
    message: tuple[re.Pattern[str], ...] = ()
    frames: tuple[re.Pattern[str], ...] = ()
    raises: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    anchors: tuple[str, ...] = ()
    """Literals of which every line that can start an occurrence contains at least one."""
    find_anchors: tuple[str, ...] = ()
    """`anchors` less those of the patterns searched as probes: for one substring search per anchor."""
    probes: tuple[str, ...] = ()
    """Regexes searched over raw bytes instead of their anchors (see the module doc)."""
    message_anchors: tuple[str, ...] = ()
    """Literals of which every line matching `message` contains one: a cheap pre-check per line."""

    def excluded(self, text: str) -> bool:
        return any(p.search(text) for p in self.exclude)


def compile_signatures(kb: KnowledgeBase) -> tuple[Signature, ...]:
    """Every signature of every problem in `kb`, compiled; KnowledgeError names the rule and field."""
    return tuple(
        compile_signature(problem.id, problem.severity, raw, index)
        for problem in kb
        for index, raw in enumerate(problem.signatures)
    )


def compile_signature(problem_id: str, severity: str, raw: Mapping[str, Any], index: int = 0) -> Signature:
    where = f"rule {problem_id!r}: signature #{index + 1}"
    if not isinstance(raw, Mapping):
        raise KnowledgeError(f"{where}: must be a table")
    for name in raw:
        if name not in FIELDS:
            raise KnowledgeError(f"{where}: field {name!r} is not a known field (known: {', '.join(FIELDS)})")
    fields = {name: _patterns(raw.get(name, ()), f"{where}: field {name!r}") for name in FIELDS[:4]}
    if not fields["message"] and not fields["frames"]:
        raise KnowledgeError(f"{where}: needs 'message' or 'frames' (or both)")
    if fields["raises"] and not fields["frames"]:
        raise KnowledgeError(f"{where}: field 'raises' only applies together with 'frames'")
    declared = _declared_anchors(raw.get("anchors"), f"{where}: field 'anchors'")
    anchors: list[str] = []
    find_anchors: list[str] = []
    probes: list[str] = []
    message_anchors: list[str] = []
    for name, patterns in (("message", fields["message"]), ("frames", fields["frames"][:1])):
        for i, pattern in enumerate(patterns):
            item = f"{where}: field {name!r} item {i + 1} ({pattern.pattern!r})"
            tree = _sre_parse.parse(pattern.pattern)
            options = _options(tree)
            best = max(options, key=_score) if options else None
            if best is None or _score(best)[0] < MIN_ANCHOR:
                raise KnowledgeError(
                    f"{item} has no literal of {MIN_ANCHOR}+ characters that every match contains; "
                    "add one (it is the scan's anchor)"
                )
            if name == "message":
                message_anchors.extend(best)
            mine = tuple(best)
            if declared:
                if not any(all(any(a in o for a in declared) for o in opt) for opt in options):
                    raise KnowledgeError(f"{item}: a match need not contain any of the declared anchors")
                mine = declared
            anchors.extend(mine)
            if _score(best)[0] < PROBE_BELOW and _bytes_safe(tree):
                probes.append(pattern.pattern)
            else:
                find_anchors.extend(mine)
    return Signature(
        problem_id=problem_id,
        severity=severity,
        index=index,
        anchors=tuple(dict.fromkeys(anchors)),
        find_anchors=tuple(dict.fromkeys(find_anchors)),
        probes=tuple(dict.fromkeys(probes)),
        message_anchors=tuple(dict.fromkeys(message_anchors)),
        **fields,
    )


def _declared_anchors(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) and len(v) >= MIN_DECLARED for v in value):
        raise KnowledgeError(f"{where} must be a list of literal strings of {MIN_DECLARED}+ characters")
    return tuple(value)


def minimal_anchors(anchors: Iterable[AnyStr]) -> tuple[AnyStr, ...]:
    """The anchors without those containing another one (a line containing the longer also contains the
    shorter), so each remaining one costs one substring search per chunk."""
    unique = sorted(set(anchors), key=len)
    kept: list[AnyStr] = []
    for anchor in unique:
        if not any(k in anchor for k in kept):
            kept.append(anchor)
    return tuple(kept)


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
        nested = _nested_unbounded(_sre_parse.parse(text))
        if nested:
            raise KnowledgeError(
                f"{item} ({text!r}) nests unbounded repetitions, which can backtrack catastrophically on "
                "hostile lines; bound the inner one (e.g. {0,64})"
            )
        compiled.append(pattern)
    return tuple(compiled)


# ---- regex analysis on the stdlib parser's tree ------------------------------------------------

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _nested_unbounded(tree: Any, inside: bool = False) -> bool:
    for op, av in tree:
        name = str(op)
        if name in _REPEATS:
            _low, high, sub = av
            unbounded = high == _MAXREPEAT
            if unbounded and inside:
                return True
            if _nested_unbounded(sub, inside or unbounded):
                return True
        elif name in {"SUBPATTERN", "ATOMIC_GROUP"}:
            if _nested_unbounded(av[-1], inside):
                return True
        elif name == "BRANCH":
            if any(_nested_unbounded(b, inside) for b in av[1]):
                return True
        elif name in {"ASSERT", "ASSERT_NOT"} and _nested_unbounded(av[1], inside):
            return True
    return False


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Literals such that every match of `pattern` contains at least one of them (the fewest, longest
    ones found), or None when there are none of MIN_ANCHOR+ characters."""
    options = _options(_sre_parse.parse(pattern))
    best = max(options, key=_score) if options else None
    if best is None or _score(best)[0] < MIN_ANCHOR:
        return None
    return tuple(sorted(best))


def _score(option: frozenset[str]) -> tuple[int, int, int]:
    # Longest shortest member, then fewest members, then fewer spaces ("borrowed" over "Already ").
    return (min(len(s) for s in option), -len(option), -sum(s.count(" ") for s in option))


def _options(tree: Any) -> list[frozenset[str]]:
    """Every way found to say "a match contains one of these literals": each option alone is sound."""
    options: list[frozenset[str]] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            options.append(frozenset({"".join(run)}))
            run.clear()

    for op, av in tree:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            continue
        if run:
            # "ab" then [cd] or (c|d)...: every match also contains "abc" or "abd"
            firsts = _first_literals(op, av)
            if firsts:
                options.append(frozenset("".join(run) + f for f in firsts))
        end_run()
        if name == "SUBPATTERN":
            options.extend(_options(av[-1]))
        elif name in _REPEATS and av[0] >= 1:
            options.extend(_options(av[2]))
        elif name == "BRANCH":
            per_branch = [_options(b) for b in av[1]]
            if all(per_branch):
                options.append(frozenset().union(*(max(b, key=_score) for b in per_branch)))
    end_run()
    return options


def _first_literals(op: Any, av: Any) -> frozenset[str] | None:
    """The few characters a match of this item can start with, when it can only start with a literal."""
    name = str(op)
    if name == "LITERAL":
        return frozenset(chr(av))
    if name == "IN":
        chars: set[str] = set()
        for cop, cav in av:
            if str(cop) == "LITERAL":
                chars.add(chr(cav))
            elif str(cop) == "RANGE" and cav[1] - cav[0] < 8:
                chars.update(chr(c) for c in range(cav[0], cav[1] + 1))
            else:
                return None
        return frozenset(chars) if 0 < len(chars) <= 8 else None
    if name == "SUBPATTERN" and len(av[-1]):
        return _first_literals(*av[-1][0])
    if name in _REPEATS and av[0] >= 1 and len(av[2]):
        return _first_literals(*av[2][0])
    if name == "BRANCH":
        parts = [_first_literals(*b[0]) if len(b) else None for b in av[1]]
        if all(parts):
            union = frozenset().union(*parts)  # type: ignore[arg-type]
            return union if len(union) <= 8 else None
    return None


_SAFE = {"LITERAL", "IN", "SUBPATTERN", "BRANCH", *_REPEATS}


def _bytes_safe(tree: Any) -> bool:
    """True when the regex matches the UTF-8 bytes of any text it matches: only ASCII literals and
    classes of ASCII literals and ranges (no `.`, no \\d or \\S, no negation, no ^ $ \\b), starting with a
    literal so that the stdlib searches it by its prefix."""
    items = list(tree)
    if not items or str(items[0][0]) != "LITERAL":
        return False
    return _ascii_only(items)


def _ascii_only(items: Any) -> bool:
    for op, av in items:
        name = str(op)
        if name not in _SAFE:
            return False
        if name == "LITERAL" and av > 0x7F:
            return False
        if name == "IN":
            for cop, cav in av:
                cname = str(cop)
                if cname == "LITERAL" and cav <= 0x7F:
                    continue
                if cname == "RANGE" and cav[1] <= 0x7F:
                    continue
                return False
        if name == "SUBPATTERN" and not _ascii_only(av[-1]):
            return False
        if name in _REPEATS and not _ascii_only(av[2]):
            return False
        if name == "BRANCH" and not all(_ascii_only(b) for b in av[1]):
            return False
    return True
