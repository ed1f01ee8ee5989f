"""A signature's Python regex, rewritten for another engine, or refused.

Scan's regexes are Python's `re`; Loki's `|~` is Go's RE2, Vector's VRL `match` is Rust's `regex`, and an
Elasticsearch/OpenSearch `regexp` query is Lucene's automaton syntax. They agree on plain text and differ
at the edges: `\\s`, `\\d` and `\\b` mean Unicode classes in Python and Rust but ASCII ones in Go;
Lucene has no `(?:`, no `\\d`, no lookaround and matches the whole term; Rust reads `&&` and `--` inside a
class as set operations. So a pattern is parsed here (a whitelist of constructs, no CPython internals) and
written again for each engine with its character classes spelled out, code point by code point, exactly
as Python reads them. Anything outside the whitelist (anchors, `\\w`, `\\b`, lookaround, backreferences,
flags, possessive repeats) raises `Unsupported`: a rule that cannot say what scan says is not exported.

The result is tested with each engine on every fixture line (tests/knowledge/test_rules_export.py).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache

MAX_REPEAT = 1000
"""RE2 refuses larger counts; real signatures stay far below."""


class Unsupported(ValueError):
    """The pattern uses a construct that the other engines cannot express as Python reads it."""


# ---- the parsed form ----------------------------------------------------------------------------------

Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Chars:
    """A set of code points (one literal is a set of one); `negated` = every code point but these."""

    ranges: Ranges
    negated: bool = False


@dataclass(frozen=True)
class Repeat:
    node: Node
    low: int
    high: int | None  # None: unbounded


@dataclass(frozen=True)
class Alt:
    options: tuple[Seq, ...]


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


Node = Chars | Repeat | Alt | Seq

NEWLINE: Ranges = ((10, 10),)
ANY = Chars(NEWLINE, negated=True)  # Python's `.` without DOTALL


def _ranges_where(test: str) -> Ranges:
    out: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if getattr(chr(cp), test)():
            if out and out[-1][1] == cp - 1:
                out[-1] = (out[-1][0], cp)
            else:
                out.append((cp, cp))
    return tuple(out)


@cache
def python_class(letter: str) -> Ranges:
    """The code points Python's `\\s` / `\\d` match in a str pattern: str.isspace / str.isdecimal, which
    is what the `re` engine tests (the test suite checks this against `re` itself)."""
    return _ranges_where({"s": "isspace", "d": "isdecimal"}[letter])


_SIMPLE_ESCAPES = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "a": 7}


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def fail(self, what: str) -> Unsupported:
        return Unsupported(f"{what} (at {self.i} in {self.p!r})")

    def parse(self) -> Node:
        node = self.alternation()
        if self.i != len(self.p):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        options = [self.sequence()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> Seq:
        items: list[Node] = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            atom = self.atom()
            items.append(self.quantified(atom))
        return Seq(tuple(items))

    def atom(self) -> Node:
        ch = self.p[self.i]
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == "\\":
            return self.escape(in_class=False)
        if ch in "^$":
            # scan matches the message after its prefixes are removed; a raw line starts elsewhere
            raise self.fail(f"the anchor {ch!r} (scan anchors at the message, a raw line has prefixes)")
        if ch in "*+?":
            raise self.fail("a repeat with nothing to repeat")
        self.i += 1
        if ch == ".":
            return ANY
        return _char(ord(ch))

    def group(self) -> Node:
        self.i += 1
        if self.p.startswith("?:", self.i):
            self.i += 2
        elif self.p.startswith("?P<", self.i):
            end = self.p.find(">", self.i)
            if end < 0:
                raise self.fail("an unterminated group name")
            self.i = end + 1  # the name only labels scan's detail; other engines need no capture
        elif self.p.startswith("?", self.i):
            raise self.fail("lookaround, flags, comments or a backreference group")
        node = self.alternation()
        if self.i >= len(self.p) or self.p[self.i] != ")":
            raise self.fail("an unterminated group")
        self.i += 1
        return node if isinstance(node, Seq) else Seq((node,))

    def quantified(self, atom: Node) -> Node:
        while self.i < len(self.p):
            ch = self.p[self.i]
            if ch in "*+?":
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
                self.i += 1
            elif ch == "{":
                m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.p, self.i)
                if m is None or not (m[1] or m[2]):
                    return atom  # Python reads such a brace as a literal; the next atom takes it
                low = int(m[1] or 0)
                high = int(m[3]) if m[3] else (None if m[2] else low)
                if max(low, high or 0) > MAX_REPEAT:
                    raise self.fail(f"a repeat count above {MAX_REPEAT}")
                self.i = m.end()
            else:
                return atom
            if self.i < len(self.p) and self.p[self.i] == "+":
                raise self.fail("a possessive repeat")
            if self.i < len(self.p) and self.p[self.i] == "?":
                self.i += 1  # lazy: the same lines match, only the span differs
            atom = Repeat(atom, low, high)
        return atom

    def char_class(self) -> Chars:
        start = self.i
        self.i += 1
        negated = self.p.startswith("^", self.i)
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.fail("an unterminated character class")
            ch = self.p[self.i]
            if ch == "]" and not first:
                self.i += 1
                break
            first = False
            if ch == "[" or self.p.startswith(("&&", "--", "~~", "||"), self.i):
                # Python warns these may become set operations; Rust already reads them as such
                raise self.fail("'[', '&&', '--', '~~' or '||' inside a class")
            lo = self.class_item()
            if isinstance(lo, tuple):
                ranges.extend(lo)
                continue
            if self.p.startswith("-", self.i) and not self.p.startswith("-]", self.i):
                self.i += 1
                hi = self.class_item()
                if isinstance(hi, tuple) or hi < lo:
                    raise self.fail("a bad range in a class")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        if not ranges:
            raise Unsupported(f"an empty class in {self.p[start:self.i]!r}")
        return Chars(_merge(ranges), negated)

    def class_item(self) -> int | Ranges:
        if self.p[self.i] == "\\":
            node = self.escape(in_class=True)
            if node.negated:
                raise self.fail("a negated shorthand (\\S, \\D) inside a class")
            return node.ranges if len(node.ranges) != 1 or node.ranges[0][0] != node.ranges[0][1] else node.ranges[0][0]
        self.i += 1
        return ord(self.p[self.i - 1])

    def escape(self, in_class: bool) -> Chars:
        if self.i + 1 >= len(self.p):
            raise self.fail("a trailing backslash")
        ch = self.p[self.i + 1]
        self.i += 2
        if ch in "sSdD":
            return Chars(python_class(ch.lower()), negated=ch.isupper())
        if ch in _SIMPLE_ESCAPES:
            return _char(_SIMPLE_ESCAPES[ch])
        if ch == "b" and in_class:
            return _char(8)
        if ch in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[ch]
            digits = self.p[self.i : self.i + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise self.fail("a bad \\x/\\u escape")
            self.i += width
            return _char(int(digits, 16))
        if ch.isascii() and ch.isalnum():
            # \w \W \b \B \A \Z \N{...} \0 and backreferences: no faithful spelling in every engine
            raise self.fail(f"the escape \\{ch}")
        return _char(ord(ch))


def _char(cp: int) -> Chars:
    return Chars(((cp, cp),))


def _merge(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return tuple(out)


def parse(pattern: str) -> Node:
    """The pattern's structure; Unsupported names the first construct outside the whitelist."""
    if not pattern:
        raise Unsupported("an empty pattern")
    return _Parser(pattern).parse()


# ---- writing it again ------------------------------------------------------------------------------


def to_re2(pattern: str) -> str:
    """For Go's regexp (Loki `|~`) and RE2; also Rust's `regex` (Vector's VRL), which reads it the same.
    ASCII letters, digits, space and unambiguous punctuation stay literal; everything else is `\\x{...}`
    or escaped punctuation, so no engine (nor the string it sits in: LogQL backticks, VRL r'...') can
    misread it."""
    return _write(parse(pattern), _Re2())


def to_lucene(pattern: str) -> str:
    """For an Elasticsearch/OpenSearch `regexp` query (Lucene syntax). Lucene matches the whole term, so
    the caller wraps the alternatives in `.*(...).*` to search anywhere in the line, as scan does."""
    return _write(parse(pattern), _Lucene())


class _Re2:
    def literal(self, cp: int) -> str:
        if cp < 128 and (chr(cp).isalnum() or cp == 32):
            return chr(cp)
        if cp < 128 and chr(cp) in "!\"#%,/:;<=>@_~-&":  # unambiguous punctuation, kept for reading
            return chr(cp)
        if cp < 128 and chr(cp) in ".+*?()|[]{}^$\\":
            return "\\" + chr(cp)
        return f"\\x{{{cp:x}}}"

    def in_class(self, cp: int) -> str:
        # not `[ ] \\ ^ - & ~`: Rust reads `&&`, `--` and `~~` in a class as set operations
        if cp < 128 and (chr(cp).isalnum() or chr(cp) in "!\"#%,./:;<=>@_"):
            return chr(cp)
        return f"\\x{{{cp:x}}}"

    def group(self, body: str) -> str:
        return f"(?:{body})"


class _Lucene:
    # Lucene reads a backslash before any character as that character; it has no \x escapes, so other
    # code points are written as themselves (JSON carries them).
    def literal(self, cp: int) -> str:
        ch = chr(cp)
        return ch if cp >= 128 or ch.isalnum() or cp == 32 or cp < 32 else "\\" + ch

    in_class = literal

    def group(self, body: str) -> str:
        return f"({body})"


_LUCENE_LONGEST_GAP = 32


def _any_char(node: Node) -> bool:
    """`.` as Python reads it: every code point but a newline."""
    return isinstance(node, Chars) and node.negated and node.ranges == ((10, 10),)


def _write(node: Node, w: _Re2 | _Lucene) -> str:
    if isinstance(node, Seq):
        if not node.items and isinstance(w, _Lucene):
            raise Unsupported("an empty group (Lucene has none)")
        # an alternation inside a sequence keeps its own group: `(?:a|b)c` is not `a|bc`
        return "".join(w.group(_write(i, w)) if isinstance(i, Alt) else _write(i, w) for i in node.items)
    if isinstance(node, Alt):
        return "|".join(_write(o, w) for o in node.options)
    if isinstance(node, Repeat):
        inner = _write(node.node, w)
        if not isinstance(node.node, Chars):  # a class or a literal is one atom; anything else is grouped
            inner = w.group(inner)
        if (node.low, node.high) == (0, None):
            q = "*"
        elif (node.low, node.high) == (1, None):
            q = "+"
        elif (node.low, node.high) == (0, 1):
            q = "?"
        elif node.high is None or (isinstance(w, _Lucene) and node.high > _LUCENE_LONGEST_GAP and _any_char(node.node)):
            # Lucene determinizes `.*` before a long bounded gap of any character into more than its 10,000
            # states (every place the text before the gap could have started is a state of its own); the
            # gap unbounded, the query only also matches a line whose gap is longer (a log line has no \n)
            q = "*" if node.low == 0 else "+" if node.low == 1 else f"{{{node.low},}}"
        elif node.high == node.low:
            q = f"{{{node.low}}}"
        else:
            q = f"{{{node.low},{node.high}}}"
        return inner + q
    return _chars(node, w)


def _chars(node: Chars, w: _Re2 | _Lucene) -> str:
    if not node.negated and len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
        return w.literal(node.ranges[0][0])
    ranges = node.ranges
    if node.negated:
        # A negated class must not cross a line break either: scan never sees one inside a line, but an
        # engine may get a multi-line event (Python never contains \n in a line, so nothing changes there).
        ranges = _merge([*ranges, *NEWLINE])
    body = "".join(
        w.in_class(lo) + (w.in_class(hi) if hi == lo + 1 else f"-{w.in_class(hi)}" if hi > lo else "")
        for lo, hi in ranges
    )
    return f"[{'^' if node.negated else ''}{body}]"
