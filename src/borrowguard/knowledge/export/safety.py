"""What may reach a generated file: no character that ends a line or a comment for some reader.

An export is read by YAML parsers, Loki, Vector, Elasticsearch, markdown renderers and people. YAML breaks
a line at CR, NEL, U+2028 and U+2029 as well as LF, so a selector or a rule's id with one of them in the
header comment would start a new, uncommented line (a top-level key); LF inside a LogQL backtick string
splits the query across lines of the loki export. Escape codes and other control characters change what
a terminal shows; the bidirectional controls make a comment read differently from what it is.

So every text a user gives that reaches an export (the options, and the ids, titles, explanations and
signatures of a `--rules` file) is checked first and refused in one line that names the field and the
character, and every export is checked again as a whole before it leaves (`check_output`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from borrowguard.errors import ConfigError, UserInputError
from borrowguard.knowledge.loader import KnowledgeBase

_BIDI = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
_NAMES = {"\r": "carriage return", "\n": "line feed", "\x85": "next line, NEL", "\u2028": "line separator",
          "\u2029": "paragraph separator", "\x1b": "escape", "\x00": "NUL", "\t": "tab"}
MAX_SHOWN = 80
"""A refused value is shown cut to this many characters (with its length): it may be huge."""


def unsafe(text: str, *, newline: bool = False) -> tuple[int, str] | None:
    """The offset and the first character of `text` that must not reach an export, or None. Tab is
    allowed; line feed only where `newline` (an explanation's paragraphs)."""
    for i, ch in enumerate(text):
        if ch == "\t" or (ch == "\n" and newline):
            continue
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return i, ch
    return None


def describe(ch: str) -> str:
    """`U+000D (carriage return)`: a character named without printing it."""
    name = _NAMES.get(ch) or unicodedata.name(ch, "control character").lower()
    return f"U+{ord(ch):04X} ({name})"


def shown(text: str) -> str:
    """`text` as a message may quote it: escaped (repr), cut when long."""
    if len(text) <= MAX_SHOWN:
        return repr(text)
    return f"{text[:MAX_SHOWN]!r}... ({len(text):,} characters)"


def check_line(value: str, what: str, *, setting: str | None = None) -> str:
    """`value` (one line: an option, an id, a title), or UserInputError naming `what` and the character
    (ConfigError naming `setting`, when the value is one of export's Options)."""
    found = unsafe(value)
    if found is not None:
        i, ch = found
        problem = (f"{shown(value)} contains {describe(ch)} at offset {i}; "
                   "it would end a line or a comment of the export; remove it")
        if setting is not None:
            raise ConfigError(setting, "{} ", detail=problem)
        raise UserInputError(f"{what} {problem}")
    return value


def _check_text(value: Any, what: str, *, newline: bool) -> None:
    for text in (value,) if isinstance(value, str) else _strings(value):
        found = unsafe(text, newline=newline)
        if found is not None:
            i, ch = found
            raise UserInputError(f"{what} contains {describe(ch)} at offset {i} (in {shown(text)}); "
                                 "it would end a line or a comment of the export; remove it")


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def check_knowledge(kb: KnowledgeBase) -> None:
    """Every text of every problem that an export can carry; UserInputError names the rule and field."""
    for problem in kb:
        check_line(problem.id, "a rule's id")
        where = f"rule {shown(problem.id)}: field"
        check_line(problem.title, f"{where} 'title'")
        _check_text(problem.explanation, f"{where} 'explanation'", newline=True)
        for name in ("remedies", "references", "related"):
            _check_text(getattr(problem, name), f"{where} {name!r}", newline=False)
        for index, raw in enumerate(problem.signatures):
            _check_text(raw, f"{where} 'signature' #{index + 1}", newline=False)
        if problem.detect is not None:
            _check_text(problem.detect, f"{where} 'detect'", newline=False)


def check_output(text: str, fmt: str) -> str:
    """The whole export, once more: nothing from the checks above may have been missed on the way."""
    found = unsafe(text, newline=True)
    if found is not None:
        i, ch = found
        line = text.count("\n", 0, i) + 1
        raise UserInputError(f"the {fmt} export would contain {describe(ch)} on line {line}; refusing to write it")
    return text


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def json_text(doc: Any) -> str:
    """`doc` as indented JSON, non-ASCII text kept readable, but the characters of `unsafe` that JSON
    allows raw inside strings (DEL and C1 controls, U+2028, U+2029, bidi controls) written as \\u
    escapes: a Lucene regexp spelling out Python's `\\s` contains NEL and U+2028."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text) + "\n"


def vrl_string(text: str) -> str:
    """A VRL string literal of `text`: VRL reads `{{ ... }}` inside "..." as a template, so `{` is escaped
    too (VRL has no `\\}` escape, and a `}` alone is literal)."""
    check_line(text, "a VRL string")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "\\{")
    return f'"{escaped}"'
