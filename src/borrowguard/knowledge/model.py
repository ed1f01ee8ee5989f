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


class Kind(StrEnum):
    """What sort of problem a rule is about: what other rooms ask the knowledge base for ("which log
    findings are the tokenizer race?", "which one is an engine death?") instead of naming ids."""

    TOKENIZER_RACE = "tokenizer-race"
    """The tokenizer thread race itself, or a server's path into it."""
    ENGINE_DEATH = "engine-death"
    HANG = "hang"
    COLLECTIVE = "collective"
    """NCCL and the collectives built on it."""
    CACHE = "cache"
    MEMORY = "memory"
    HTTP_STATUS = "http-status"
    VERSION = "version"
    """Versions that do not fit together (no race of their own)."""
    INFO = "info"
    """A fact about the environment, not a problem (the guard is active, a version that cannot race)."""
    NOT_THE_TOKENIZER = "not-the-tokenizer"
    """A near miss worth saying: the same words, another cause (a PyO3 borrow error in another library)."""
    OTHER = "other"


_SEVERITY_RANK = {s: i for i, s in enumerate(Severity)}
_CONFIDENCE_RANK = {c: i for i, c in enumerate(Confidence)}

SEVERITIES = tuple(s.value for s in Severity)
KINDS = tuple(k.value for k in Kind)
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


def listed(value: Any) -> Any:
    """A table field that rules.toml may write as one string or as a list, as a tuple (absent: empty);
    anything else is returned as it is, for the field's own check to name."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value) if isinstance(value, (list, tuple)) else value
