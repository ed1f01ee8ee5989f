"""Vector: a `remap` transform whose VRL tags each matching event with the finding ids it shows.

    transforms:
      borrowguard_findings:
        type: remap
        inputs: ["vllm_logs"]
        source: |-
          ...
          if match(line, r'Already borrowed|...') && !match(line, r'...') { ids = push(ids, "...") }

VRL's `match` is Rust's `regex` crate; the patterns are written as `dialects.to_re2` writes them, which
Rust reads the same way (every class spelled out, no `\\s` or `\\d`, no quote characters left raw).
Events that match get `.borrowguard_ids` (an array); others pass through unchanged.
"""

from __future__ import annotations

import re

from borrowguard.errors import ConfigError
from borrowguard.knowledge.export import _yaml
from borrowguard.knowledge.export.dialects import to_re2
from borrowguard.knowledge.export.lines import ExportPlan, LineRule, header, plan
from borrowguard.knowledge.export.safety import vrl_string
from borrowguard.knowledge.loader import KnowledgeBase

DEFAULT_FIELD = "message"
DEFAULT_INPUT = "vllm_logs"
TRANSFORM = "borrowguard_findings"
TAG = "borrowguard_ids"
_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_FIELD = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT}){{0,7}}")
_INPUT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.*-]{0,127}")


def check_field(field: str) -> str:
    if not _FIELD.fullmatch(field):
        raise ConfigError("field", "{} ", detail=f"{field!r}: give the event field holding the line, e.g. message or log.msg")
    return field


def check_input(name: str) -> str:
    if not _INPUT.fullmatch(name):
        raise ConfigError("source", "{} ", detail=f"{name!r}: give the id of the Vector source (or transform) with the logs")
    return name


def vector_plan(kb: KnowledgeBase) -> ExportPlan:
    return plan(kb, to_re2)


def _regex(alternatives: tuple[str, ...]) -> str:
    body = "|".join(alternatives)
    if "'" in body:  # to_re2 writes a quote as \x{27}; a raw one would end the r'...' literal
        raise ValueError(f"quote in {body!r}")
    return f"r'{body}'"


def condition(rule: LineRule) -> str:
    parts = []
    for sig in rule.signatures:
        part = f"match(line, {_regex(sig.message)})"
        if sig.exclude:
            part += f" && !match(line, {_regex(sig.exclude)})"
        parts.append(part if len(rule.signatures) == 1 else f"({part})")
    return " || ".join(parts)


def program(kb: KnowledgeBase, field: str) -> str:
    """The VRL source: one `if` per finding id."""
    p = vector_plan(kb)
    lines = [
        "# borrowguard line signatures; `borrowguard explain ID` tells what each id means.",
        f"line = to_string(.{field}) ?? \"\"",
        "ids = []",
    ]
    for rule in p.rules:
        lines.append(f"if {condition(rule)} {{ ids = push(ids, {vrl_string(rule.problem.id)}) }}")
    lines.append(f"if length(ids) > 0 {{ .{TAG} = ids }}")
    return "\n".join(lines)


def export(kb: KnowledgeBase, field: str, source: str, command: str) -> str:
    """`--format vector`: a YAML config fragment with the remap transform."""
    p = vector_plan(kb)
    comments = [
        *header(p, command, "Vector (VRL match)"),
        f"Reads `.{field}` of the events from `{source}`; matching events get `.{TAG}` (an array of finding",
        f"ids). Route on it downstream, e.g. a `filter` transform with condition: exists(.{TAG})",
    ]
    config = {"transforms": {TRANSFORM: {"type": "remap", "inputs": [source], "source": program(kb, field)}}}
    return _yaml.dump(config, comments)
