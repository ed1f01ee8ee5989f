"""The states a finding can be in, shared by doctor and scan: severity and confidence.

Both are string enums: a member equals, prints and serialises as its value ("error", "high"), so JSON
output and comparisons with plain strings are unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any

from borrowguard._compat import StrEnum


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


class Confidence(StrEnum):
    """How sure a log finding is: the exact final line (high), traceback frames only (medium), context
    only, such as a hang (low)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return _CONFIDENCE_RANK[self]

    def lower(self) -> Confidence:
        """One step less sure (low stays low)."""
        return {Confidence.HIGH: Confidence.MEDIUM}.get(self, Confidence.LOW)


_SEVERITY_RANK = {s: i for i, s in enumerate(Severity)}
_CONFIDENCE_RANK = {c: i for i, c in enumerate(Confidence)}

SEVERITIES = tuple(s.value for s in Severity)
CONFIDENCES = tuple(c.value for c in Confidence)


def jsonable(value: Any) -> Any:
    """A dataclass (or anything inside one) as plain JSON values: fields by name, tuples as lists, enums
    as their values. The one serialisation helper for result types whose JSON keys are their field
    names."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value
