"""Tool schemas from untrusted clients: jsonschema judges them, and every size in them is bounded.

The stub engine builds arguments for `tool_choice: "required"`. A schema chooses their size
(`minLength`, `minItems`, references that repeat a sub-schema): the builder pays for each value from a
fixed budget before making it, so a schema that needs gigabytes is refused, never allocated.
"""

from __future__ import annotations

import json
import tracemalloc
import urllib.request
from typing import Any

import jsonschema
import pytest

from borrowguard.server.tools import (
    MAX_ARGUMENT_CHARS,
    ToolArgumentsError,
    ToolSchemaError,
    example_arguments,
    validate_parameters,
)


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _fan_out(levels: int) -> dict[str, Any]:
    """Each level's object holds two copies of the next: 2**levels leaves from a schema of a few lines."""
    defs = {f"l{i}": _obj(a={"$ref": f"#/$defs/l{i + 1}"}, b={"$ref": f"#/$defs/l{i + 1}"})
            for i in range(levels)}
    defs[f"l{levels}"] = {"type": "string", "minLength": 8}
    return {**_obj(root={"$ref": "#/$defs/l0"}), "$defs": defs}


HUGE = {
    "minLength": _obj(text={"type": "string", "minLength": 1_000_000_000}),
    "minItems": _obj(rows={"type": "array", "minItems": 100_000,
                           "items": {"type": "string", "minLength": 100_000}}),
    "fan-out": _fan_out(12),  # 4096 leaves
    "const": {**_fan_out(12), "$defs": {**_fan_out(12)["$defs"], "l12": {"const": "y" * 10_000}}},
}


@pytest.mark.parametrize("name", list(HUGE))
def test_client_chosen_sizes_are_refused_before_they_are_allocated(name: str) -> None:
    schema = HUGE[name]
    validate_parameters(schema)  # a valid schema: only what it asks for is too large
    tracemalloc.start()
    try:
        with pytest.raises(ToolArgumentsError, match=f"exceed {MAX_ARGUMENT_CHARS} characters"):
            example_arguments(schema)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MAX_ARGUMENT_CHARS, peak  # never more than a small multiple of the budget


def test_arguments_within_the_budget_are_built_and_valid() -> None:
    tree = _fan_out(6)
    schema = {**_obj(text={"type": "string", "minLength": 1000},
                     rows={"type": "array", "minItems": 50, "items": {"type": "integer", "minimum": 7}},
                     tree=tree["properties"]["root"]), "$defs": tree["$defs"]}
    arguments = example_arguments(schema)
    jsonschema.Draft202012Validator(schema).validate(arguments)
    assert len(arguments["text"]) == 1000 and arguments["rows"] == [7] * 50
    assert len(json.dumps(arguments)) <= MAX_ARGUMENT_CHARS


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "pattern": "^[0-9]+$"},
        {"type": "array", "minItems": 2, "uniqueItems": True, "items": {"type": "string"}},
        {"type": "string", "not": {"const": "stub"}},
        {"type": "string", "minLength": 5, "maxLength": 2},
        {"enum": []},
    ],
)
def test_what_the_stub_cannot_satisfy_is_refused_never_sent_invalid(prop: dict[str, Any]) -> None:
    schema = _obj(x=prop)
    validate_parameters(schema)
    with pytest.raises(ToolArgumentsError, match="cannot satisfy"):
        example_arguments(schema)


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer", "minimum": 10**400, "multipleOf": 3},  # int / int overflows a float
        {"type": "number", "minimum": 1e308, "multipleOf": 1e-308},  # ceil(inf)
        {"type": "number", "exclusiveMinimum": 1.7976931348623157e308},
    ],
)
def test_impossible_numbers_are_a_client_error_not_a_crash(prop: dict[str, Any]) -> None:
    with pytest.raises(ToolArgumentsError):
        example_arguments(_obj(n=prop))


@pytest.mark.slow
def test_references_that_multiply_validation_work_are_bounded() -> None:
    # allOf of two references to the next level, 24 levels: 2**24 evaluations if nothing stopped it.
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
            for i in range(24)}
    defs["d24"] = {"type": "string"}
    schema = {**_obj(x={"$ref": "#/$defs/d0"}), "$defs": defs}
    validate_parameters(schema)
    with pytest.raises(ToolArgumentsError, match="too much work"):
        example_arguments(schema)


def test_a_remote_reference_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    def fetch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a tool schema made the server fetch a URL")

    monkeypatch.setattr(urllib.request, "urlopen", fetch)
    remote = {"$ref": "http://127.0.0.1:9/evil.json"}
    with pytest.raises(ToolSchemaError, match="only local references"):
        validate_parameters(_obj(x=remote))
    # Past the parse-time check (the builder does not look inside `not`), jsonschema would resolve it.
    with pytest.raises(ToolArgumentsError, match="does not resolve"):
        example_arguments(_obj(x={"type": "string", "not": remote}))


def test_local_references_and_other_drafts_are_honoured() -> None:
    recursive = {**_obj(tree={"$ref": "#/$defs/node"}),
                 "$defs": {"node": {"type": "object", "properties": {"kids": {
                     "type": "array", "items": {"$ref": "#/$defs/node"}, "minItems": 0}}}}}
    validate_parameters(recursive)
    assert example_arguments(recursive) == {"tree": {}}
    validate_parameters({"type": "object", "properties": {"self": {"$ref": "#"}}})
    validate_parameters({"type": "object", "properties": {"a": {"$anchor": "A"}, "b": {"$ref": "#A"}}})
    # draft-07 allows `items` as an array; 2020-12 does not.
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **_obj(
        pair={"type": "array", "items": [{"type": "string"}, {"type": "integer"}]})}
    validate_parameters(draft7)
    with pytest.raises(ToolSchemaError, match="is not of type 'object', 'boolean'"):
        validate_parameters({k: v for k, v in draft7.items() if k != "$schema"})


def test_long_offending_values_are_clipped_in_messages() -> None:
    with pytest.raises(ToolSchemaError) as info:
        validate_parameters(_obj(x={"type": "string", "minLength": "9" * 100_000}))
    assert len(str(info.value)) < 400


def test_arguments_nested_past_the_depth_limit_are_refused() -> None:
    schema = _fan_out(30)  # also 2**30 leaves: the depth limit ends it first
    validate_parameters(schema)
    with pytest.raises(ToolArgumentsError, match="deeper than"):
        example_arguments(schema)


@pytest.mark.slow
def test_the_tools_of_one_request_are_bounded_together() -> None:
    from borrowguard.server.protocol import MAX_TOOL_SUBSCHEMAS, APIError, parse_chat

    properties = {f"p{i}": {"type": "string"} for i in range(1000)}
    tools = [{"type": "function", "function": {"name": f"t{i}", "parameters": {
        "type": "object", "properties": properties}}} for i in range(MAX_TOOL_SUBSCHEMAS // 1000 + 1)]
    messages = [{"role": "user", "content": "hi"}]
    parse_chat({"messages": messages, "tools": tools[:2]})  # 2002 sub-schemas: fine
    with pytest.raises(APIError, match=f"more than {MAX_TOOL_SUBSCHEMAS} sub-schemas") as info:
        parse_chat({"messages": messages, "tools": tools})
    assert info.value.status == 400
