"""Just enough YAML to write rule files, without a YAML library at run time (PyYAML is not a dependency).

Mappings, lists, ints and strings. A string is written as a JSON string, which is a valid YAML double-quoted
scalar for every YAML parser (Go's yaml.v3, PyYAML); a multi-line printable string (a VRL program) is a
literal block. Characters YAML would read as line breaks (NEL, U+2028, U+2029) or not accept raw are
escaped. The tests parse every export back with PyYAML and compare it with what was meant.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def dump(value: Mapping[str, Any], comments: Sequence[str] = ()) -> str:
    """`value` as a YAML document, after `comments` (each line prefixed with '# ')."""
    head = "".join(f"# {c}".rstrip() + "\n" for c in comments)
    return head + "".join(_mapping(value, 0))


def scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"no YAML for {type(value).__name__}")
    text = json.dumps(value, ensure_ascii=False)
    return "".join(ch if _plain(ch) else _escape(ch) for ch in text)


def _plain(ch: str) -> bool:
    return (ch.isprintable() and ch not in "\u2028\u2029\ufeff") or ch == " "


def _escape(ch: str) -> str:
    cp = ord(ch)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _key(key: str) -> str:
    plain = key.replace("_", "").replace("-", "").isalnum() and key.isascii() and not key[:1].isdigit()
    return key if plain else scalar(key)


def _block(value: str) -> bool:
    lines = value.split("\n")
    return (
        len(lines) > 1
        and not value.startswith((" ", "\n"))
        and not value.endswith("\n")
        and all(all(_plain(ch) for ch in line) and line == line.rstrip() for line in lines)
    )


def _mapping(value: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key, item in value.items():
        out += _entry(f"{pad}{_key(key)}:", item, indent)
    return out


def _entry(lead: str, item: Any, indent: int) -> list[str]:
    if isinstance(item, Mapping):
        return [lead + " {}\n"] if not item else [lead + "\n", *_mapping(item, indent + 2)]
    if isinstance(item, (list, tuple)):
        if not item:
            return [lead + " []\n"]
        out = [lead + "\n"]
        for element in item:
            out += _list_item(element, indent + 2)
        return out
    if isinstance(item, str) and _block(item):
        pad = " " * (indent + 2)
        return [lead + " |-\n", *(f"{pad}{line}\n" if line else "\n" for line in item.split("\n"))]
    return [f"{lead} {scalar(item)}\n"]


def _list_item(element: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(element, Mapping) and element:
        lines = _mapping(element, indent + 2)
        return [f"{pad}- {lines[0].lstrip()}", *lines[1:]]
    if isinstance(element, (Mapping, list, tuple)):
        raise TypeError("nested empty collections and lists of lists are not needed here")
    return [f"{pad}- {scalar(element)}\n"]
