"""Tool schemas: reject malformed ones, and build arguments that satisfy a valid one.

The stub engine answers `tool_choice: "required"` or a named function with a call whose arguments
validate against the tool's JSON schema, as a guided-decoding engine would. We support the subset of
JSON Schema that function-calling clients use: types, properties/required, enum/const, items,
numeric and length bounds, anyOf/oneOf/allOf and local $ref. Schemas are untrusted input, so
traversal is bounded in depth and in the number of nodes visited.
"""

from __future__ import annotations

import math
from typing import Any

TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
MAX_DEPTH = 32
MAX_NODES = 10_000
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_FORMATS = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00",
    "email": "stub@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


class ToolSchemaError(ValueError):
    """A tool's `parameters` is not a schema we can honour."""


def validate_parameters(schema: Any) -> None:
    """Raise ToolSchemaError unless `schema` is a well-formed object schema for function arguments."""
    if not isinstance(schema, dict):
        raise ToolSchemaError("parameters must be a JSON object")
    declared = schema.get("type", "object")
    if declared != "object":
        raise ToolSchemaError(f"the top-level type must be 'object', got {declared!r}")
    _check(schema, "parameters", 0, [0], schema)


def _check(schema: Any, path: str, depth: int, budget: list[int], root: dict[str, Any]) -> None:
    budget[0] += 1
    if budget[0] > MAX_NODES:
        raise ToolSchemaError(f"more than {MAX_NODES} sub-schemas")
    if depth > MAX_DEPTH:
        raise ToolSchemaError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(schema, bool):  # `true` / `false` are valid schemas
        return
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{path} must be an object, got {type(schema).__name__}")
    declared = schema.get("type")
    if declared is not None:
        names = declared if isinstance(declared, list) else [declared]
        if not names or any(not isinstance(name, str) or name not in TYPES for name in names):
            raise ToolSchemaError(f"{path}.type {declared!r} is not one of {', '.join(sorted(TYPES))}")
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            raise ToolSchemaError(f"{path}.properties must be an object")
        for name, sub in properties.items():
            _check(sub, f"{path}.properties.{name}", depth + 1, budget, root)
    required = schema.get("required")
    if required is not None:
        if not isinstance(required, list) or any(not isinstance(name, str) for name in required):
            raise ToolSchemaError(f"{path}.required must be an array of property names")
        missing = [name for name in required if name not in (properties or {})]
        if missing and schema.get("additionalProperties") is False:
            raise ToolSchemaError(f"{path}.required names undefined properties {missing}")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ToolSchemaError(f"{path}.enum must be a non-empty array")
    items = schema.get("items")
    if items is not None:
        _check(items, f"{path}.items", depth + 1, budget, root)
    for key in _SCHEMA_LISTS:
        if key in schema:
            options = schema[key]
            if not isinstance(options, list) or not options:
                raise ToolSchemaError(f"{path}.{key} must be a non-empty array of schemas")
            for i, sub in enumerate(options):
                _check(sub, f"{path}.{key}[{i}]", depth + 1, budget, root)
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        value = schema.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ToolSchemaError(f"{path}.{key} must be a number")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        value = schema.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ToolSchemaError(f"{path}.{key} must be a non-negative integer")
    ref = schema.get("$ref")
    if ref is not None:
        _resolve(ref, root, path)
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if defs is not None:
            if not isinstance(defs, dict):
                raise ToolSchemaError(f"{path}.{key} must be an object")
            for name, sub in defs.items():
                _check(sub, f"{path}.{key}.{name}", depth + 1, budget, root)


def _resolve(ref: Any, root: dict[str, Any], path: str) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise ToolSchemaError(f"{path}.$ref {ref!r}: only local references (#/...) are supported")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ToolSchemaError(f"{path}.$ref {ref!r} does not resolve")
        node = node[part]
    return node


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Deterministic arguments that satisfy `schema` (already checked by validate_parameters)."""
    value = _example(schema, schema, 0)
    return value if isinstance(value, dict) else {}


def _example(schema: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > MAX_DEPTH or schema is True or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return _example(_resolve(schema["$ref"], root, "$ref"), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _example(schema[key][0], root, depth + 1)
    if "allOf" in schema:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            if isinstance(sub, dict):
                sub = _resolve(sub["$ref"], root, "$ref") if "$ref" in sub else sub
                for key, value in sub.items():
                    if key in ("properties", "required") and key in merged:
                        merged[key] = (
                            {**merged[key], **value} if key == "properties" else [*merged[key], *value]
                        )
                    else:
                        merged.setdefault(key, value)
        return _example(merged, root, depth + 1)
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((name for name in declared if name != "null"), "null")
    if declared is None:
        declared = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if declared == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required", [])
        return {name: _example(properties.get(name, {}), root, depth + 1) for name in required}
    if declared == "array":
        count = max(schema.get("minItems", 1), 0)
        if "maxItems" in schema:
            count = min(count, schema["maxItems"])
        return [_example(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if declared in ("integer", "number"):
        return _number(schema, declared == "integer")
    if declared == "boolean":
        return True
    if declared == "null":
        return None
    return _string(schema)


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


def _string(schema: dict[str, Any]) -> str:
    text = _FORMATS.get(schema.get("format", ""), "stub")
    minimum = schema.get("minLength", 0)
    if len(text) < minimum:
        text = text + "x" * (minimum - len(text))
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    return text
