"""Tool schemas: reject malformed ones, and build arguments that satisfy a valid one.

jsonschema checks each tool's `parameters` against its metaschema (Draft 2020-12 unless the schema's
`$schema` names another draft) and judges the arguments the stub engine builds. The stub engine answers
`tool_choice: "required"` or a named function with a call whose arguments validate against the tool's
schema, as a guided-decoding engine would.

Schemas are untrusted input, and every size in them is chosen by the client, so everything here is
bounded before it is used: the schema's nesting and number of sub-schemas, references (local only:
nothing is ever fetched), the size of the arguments built (a `minLength` of 10⁹ is refused, not
allocated) and the work spent validating them (references can make a small schema exponential).
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from borrowguard.server.arguments import MAX_ARGUMENT_CHARS, MAX_DEPTH, ToolArgumentsError, build_arguments

__all__ = ["MAX_ARGUMENT_CHARS", "ToolArgumentsError", "ToolSchemaError", "example_arguments", "schema_size",
           "validate_parameters"]

MAX_NODES = 10_000
MAX_VALIDATION_STEPS = 200_000  # keyword evaluations for one validation of arguments
_MAX_MESSAGE = 300
_MAX_CACHED_SCHEMA = 16 * 1024  # characters of canonical JSON: the cache holds at most 4 MiB
# An empty registry that retrieves nothing: a remote $ref stays unresolved instead of being fetched.
_NO_REMOTE: Registry = Registry()
# Keywords whose value is a sub-schema, a list of them, or an object of them (all drafts jsonschema knows).
_ONE = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
        "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


class ToolSchemaError(ValueError):
    """A tool's `parameters` is not a schema we can honour."""


def validate_parameters(schema: Any) -> None:
    """Raise ToolSchemaError unless `schema` is a well-formed object schema for function arguments."""
    if not isinstance(schema, dict):
        raise ToolSchemaError("parameters must be a JSON object")
    # The metaschema check costs about half a millisecond for even a small schema, and clients send
    # the same tools with every request: remember the small ones that passed, by their canonical text.
    key = json.dumps(schema, sort_keys=True, allow_nan=True)
    if len(key) <= _MAX_CACHED_SCHEMA:
        _check_cached(key)
    else:
        _check(schema)


@functools.lru_cache(maxsize=256)
def _check_cached(key: str) -> None:  # lru_cache is thread-safe, and never caches an exception
    _check(json.loads(key))


def _check(schema: dict[str, Any]) -> None:
    declared = schema.get("type", "object")
    if declared != "object":
        raise ToolSchemaError(f"the top-level type must be 'object', got {_short(declared)}")
    # Our bounds first: the metaschema check recurses as deep as the schema does.
    refs, anchors, _ = _walk(schema)
    cls = _validator_class(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        message = exc.message
        if exc.absolute_path and exc.absolute_path[-1] == "type":  # jsonschema: "not valid under any of..."
            message = f"{_short(exc.instance)} is not one of {', '.join(_TYPES)}"
        raise ToolSchemaError(f"{_where(exc.absolute_path)}: {_clip(message)}") from None
    for path, ref in refs:
        _check_ref(ref, schema, anchors, path)


def schema_size(schema: Any) -> int:
    """The number of sub-schemas in `schema` (a cheap walk; raises ToolSchemaError past our bounds).

    jsonschema's metaschema check costs about 0.2 ms per sub-schema: the request parser adds these up
    over all tools and refuses a request before that cost grows with the client's body.
    """
    return _walk(schema)[2] if isinstance(schema, dict) else 1


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Deterministic arguments that satisfy `schema` (already checked by validate_parameters).

    Raises ToolArgumentsError when they would be larger than MAX_ARGUMENT_CHARS of JSON, or when the
    stub cannot satisfy the schema (a `pattern`, `not`, `uniqueItems` it does not model): jsonschema
    judges what was built, so no invalid arguments are ever sent.
    """
    arguments = build_arguments(schema)
    cls = _budgeted(_validator_class(schema))
    validator = cls(schema, registry=_NO_REMOTE)
    _steps.count = 0
    try:
        error = next(iter(validator.iter_errors(arguments)), None)
    except (_OverBudget, RecursionError):
        raise ToolArgumentsError("validating arguments for this schema takes too much work (references "
                                 "that multiply)") from None
    except Unresolvable as exc:
        raise ToolArgumentsError(f"a reference in the schema does not resolve: {_clip(str(exc))}") from None
    if error is not None:
        raise ToolArgumentsError(f"the stub engine cannot satisfy this schema: {_where(error.absolute_path, 'arguments')}: "
                                 f"{_clip(error.message)}")
    return arguments


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    dialect = schema.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        raise ToolSchemaError("parameters.$schema must be a string")
    # default= given: an unknown $schema falls back to 2020-12 quietly (no DeprecationWarning).
    return validator_for(schema, default=Draft202012Validator)


# -- bounded validation -------------------------------------------------------------------------------

_steps = threading.local()  # validations run on the tokenization pool: one counter per thread


class _OverBudget(Exception):
    pass


@functools.cache
def _budgeted(cls: type[Validator]) -> type[Validator]:
    """`cls` with every keyword counted: over MAX_VALIDATION_STEPS, validation stops."""

    def counted(keyword: Any) -> Any:
        def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            _steps.count += 1
            if _steps.count > MAX_VALIDATION_STEPS:
                raise _OverBudget
            return keyword(validator, value, instance, schema)

        return run

    return extend(cls, {name: counted(keyword) for name, keyword in cls.VALIDATORS.items()})


# -- our bounds on the schema itself ------------------------------------------------------------------


def _walk(root: dict[str, Any]) -> tuple[list[tuple[str, Any]], set[str], int]:
    """Count sub-schemas and nesting; collect every $ref / $dynamicRef and $anchor on the way."""
    refs: list[tuple[str, Any]] = []
    anchors: set[str] = set()
    count = 0
    stack: list[tuple[Any, str, int]] = [(root, "parameters", 0)]
    while stack:
        node, path, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ToolSchemaError(f"more than {MAX_NODES} sub-schemas")
        if depth > MAX_DEPTH:
            raise ToolSchemaError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        if not isinstance(node, dict):
            continue  # `true`/`false` are schemas; anything else the metaschema check reports
        for key in ("$ref", "$dynamicRef"):
            if key in node:
                refs.append((f"{path}.{key}", node[key]))
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                anchors.add(node[key])
        for key in _ONE:
            if key in node and not isinstance(node[key], list):
                stack.append((node[key], f"{path}.{key}", depth + 1))
        for key in _MANY:
            if isinstance(node.get(key), list):
                stack += [(sub, f"{path}.{key}[{i}]", depth + 1) for i, sub in enumerate(node[key])]
        for key in _NAMED:
            if isinstance(node.get(key), dict):
                stack += [(sub, f"{path}.{key}.{name}", depth + 1) for name, sub in node[key].items()]
    return refs, anchors, count


def _check_ref(ref: Any, root: dict[str, Any], anchors: set[str], path: str) -> None:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ToolSchemaError(f"{path} {_short(ref)}: only local references (#...) are supported")
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        if fragment not in anchors:
            raise ToolSchemaError(f"{path} {_short(ref)} does not resolve")
        return
    node: Any = root
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise ToolSchemaError(f"{path} {_short(ref)} does not resolve")


def _where(path: Any, root: str = "parameters") -> str:
    return root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _clip(text: str) -> str:
    # jsonschema quotes the offending value whole; a hostile one could be megabytes.
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _short(value: Any) -> str:
    return _clip(repr(value))
