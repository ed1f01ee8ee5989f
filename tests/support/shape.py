"""The shape of a JSON document: its keys and nesting, without its values.

`shape(doc)` keeps every object's keys, and for a list the merged shape of its items; scalars become
"scalar". Objects whose keys are data (scenario names, finding ids, token counts...) are listed in MAPS by
their key in the parent and become {"*": merged shape of their values}. A null merges with any shape (a
field that is null in one run and an object in another has the object's shape).

Used by tests/verify/test_verify_document.py to hold `verify --json` to the `borrowguard.verify/1` schema.
"""

from __future__ import annotations

from typing import Any

MAPS = frozenset({
    "scenarios", "repeats", "finding_counts", "prompt_tokens", "first_seen_t", "statuses", "errors_by_fault",
    "classes", "endpoints", "scales", "estimated_largest_prompt", "unfit", "server_config", "mix", "before",
    "after",
})
SCALAR = "scalar"


def shape(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        if key in MAPS or key == "findings":  # a bucket's findings by id (the log's are a list)
            merged: Any = None
            for item in value.values():
                merged = merge(merged, shape(item))
            return {"*": merged}
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        merged = None
        for item in value:
            merged = merge(merged, shape(item))
        return [merged]
    return None if value is None else SCALAR


def merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: merge(a.get(k), b.get(k)) for k in {**a, **b}}
    if isinstance(a, list) and isinstance(b, list):
        return [merge(a[0], b[0])]
    if a != b:
        raise ValueError(f"incompatible shapes: {a!r} and {b!r}")
    return a


def fits(actual: Any, expected: Any, path: str = "$") -> list[str]:
    """Where `actual` (a shape) differs from `expected`: keys added or missing, a list for an object..."""
    if actual is None or expected is None:
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        if "*" in expected or "*" in actual:
            return fits(actual.get("*"), expected.get("*"), path + ".*")
        out = [f"{path}: new key {k!r}" for k in sorted(set(actual) - set(expected))]
        out += [f"{path}: missing key {k!r}" for k in sorted(set(expected) - set(actual))]
        for k in sorted(set(actual) & set(expected)):
            out += fits(actual[k], expected[k], f"{path}.{k}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        return fits(actual[0], expected[0], path + "[]")
    return [] if actual == expected else [f"{path}: {actual!r} where the schema has {expected!r}"]
