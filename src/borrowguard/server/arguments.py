"""Deterministic function-call arguments for a tool's JSON schema, built within a size budget.

What the stub engine "generates" for `tool_choice: "required"`: the smallest plain value of each required
property, honouring types, enum/const, numeric and length bounds, formats, anyOf/oneOf (the first
option), allOf and local $ref. Every size comes from the client (`minLength`, `minItems`, references
that repeat a sub-schema), so every value is paid for from a budget of MAX_ARGUMENT_CHARS characters of
JSON *before* it is built: a schema that needs more is refused, never allocated.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import unquote

MAX_ARGUMENT_CHARS = 64 * 1024  # tool arguments are small; this is 100× what real tools take
MAX_DEPTH = 32
_FORMATS = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00",
    "email": "stub@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


class ToolArgumentsError(ValueError):
    """The stub engine cannot produce arguments for this schema: too large, or not satisfiable by it."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self, chars: int) -> None:
        self.left = chars

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise ToolArgumentsError(
                f"the arguments this schema requires exceed {MAX_ARGUMENT_CHARS} characters of JSON, "
                "more than the stub engine generates"
            )


def build_arguments(schema: dict[str, Any], max_chars: int = MAX_ARGUMENT_CHARS) -> dict[str, Any]:
    """The arguments object for `schema` (not yet validated: see tools.example_arguments)."""
    try:
        value = _Builder(schema, _Budget(max_chars)).build(schema, 0)
    except (TypeError, KeyError, IndexError, ValueError, AttributeError) as exc:
        if isinstance(exc, ToolArgumentsError):
            raise
        # A shape the metaschema of another draft allows (draft 3's boolean `required`...): the stub
        # has no answer for it, and that is the client's 400, never our 500.
        raise ToolArgumentsError(f"the stub engine cannot build arguments for this schema "
                                 f"({type(exc).__name__}: {str(exc)[:100]})") from None
    return value if isinstance(value, dict) else {}


class _Builder:
    def __init__(self, root: dict[str, Any], budget: _Budget) -> None:
        self.root = root
        self.budget = budget

    def build(self, schema: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ToolArgumentsError(f"the arguments would be nested deeper than {MAX_DEPTH} levels "
                                     "(a required property that refers to itself?)")
        if schema is True or not isinstance(schema, dict):
            self.budget.spend(4)
            return None
        if "$ref" in schema:
            return self.build(self.resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return self.copy(schema["const"])
        if schema.get("enum"):
            return self.copy(schema["enum"][0])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.build(schema[key][0], depth + 1)
        if isinstance(schema.get("allOf"), list):
            return self.build(self.merge(schema), depth + 1)
        declared = schema.get("type")
        if isinstance(declared, list):
            declared = next((name for name in declared if name != "null"), "null")
        if declared is None:
            declared = "object" if "properties" in schema else "array" if "items" in schema else "string"
        if declared == "object":
            return self.object(schema, depth)
        if declared == "array":
            return self.array(schema, depth)
        if declared in ("integer", "number"):
            return self.number(schema, declared == "integer")
        self.budget.spend(5)
        if declared == "boolean":
            return True
        if declared == "null":
            return None
        return self.string(schema)

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        self.budget.spend(2)
        out: dict[str, Any] = {}
        for name in schema.get("required", []):
            self.budget.spend(len(name) + 4)  # "name": and a comma
            out[name] = self.build(properties.get(name, {}), depth + 1)
        return out

    def array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        count = max(schema.get("minItems", 1), 0)
        if "maxItems" in schema:
            count = min(count, schema["maxItems"])
        self.budget.spend(2)
        items = schema.get("items", {})
        out = []
        for _ in range(count):  # each item pays at least its comma: the budget ends a huge minItems
            self.budget.spend(1)
            out.append(self.build(items, depth + 1))
        return out

    def number(self, schema: dict[str, Any], integer: bool) -> int | float:
        try:
            value = _number(schema, integer)
        except (OverflowError, ValueError, TypeError, ZeroDivisionError):
            value = math.inf  # bounds no number can meet (10⁴⁰⁰ / 3 overflows a float)
        if not math.isfinite(value):
            raise ToolArgumentsError("the schema's numeric bounds allow no finite number")
        self.budget.spend(len(repr(value)))
        return value

    def string(self, schema: dict[str, Any]) -> str:
        text = _FORMATS.get(schema.get("format", ""), "stub")
        minimum = schema.get("minLength", 0)
        if len(text) < minimum:
            self.budget.spend(minimum)  # before the string exists: a huge minLength ends here
            text = text + "x" * (minimum - len(text))
        if "maxLength" in schema:
            text = text[: schema["maxLength"]]
        self.budget.spend(len(text))
        return text

    def copy(self, value: Any) -> Any:
        # A const or enum value is the client's own, repeated wherever its schema is referenced: pay for it.
        self.budget.spend(len(json.dumps(value, ensure_ascii=False)))
        return value

    def merge(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            if isinstance(sub, dict):
                sub = self.resolve(sub["$ref"]) if "$ref" in sub else sub
                for key, value in sub.items():
                    if key in ("properties", "required") and key in merged:
                        merged[key] = {**merged[key], **value} if key == "properties" else [*merged[key], *value]
                    else:
                        merged.setdefault(key, value)
        return merged

    def resolve(self, ref: Any) -> Any:
        # validate_parameters accepted only local references that resolve; anchors are left to jsonschema.
        if not isinstance(ref, str) or not ref.startswith("#") or (ref[1:2] not in ("", "/")):
            raise ToolArgumentsError(f"the stub engine cannot follow the reference {ref!r}")
        node: Any = self.root
        for part in unquote(ref[1:]).split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    high = schema.get("maximum")
    step = 1 if integer else 0.5
    if schema.get("exclusiveMinimum") is not None:
        above = schema["exclusiveMinimum"] + step
        low = above if low is None else max(low, above)
    if schema.get("exclusiveMaximum") is not None:
        below = schema["exclusiveMaximum"] - step
        high = below if high is None else min(high, below)
    value: float = 1 if low is None else low
    if high is not None and value > high:
        value = high
    multiple = schema.get("multipleOf")
    if multiple:
        value = math.ceil(value / multiple) * multiple
    if integer:
        return math.ceil(value)
    return float(value)
