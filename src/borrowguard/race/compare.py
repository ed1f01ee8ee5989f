"""Comparing a concurrent call with its serial reference: every field, exceptions included.

    expected = reference(tok, calls)               # serial, one thread
    normalise(tok(text)) == expected[i]            # a hashable form of any result
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from borrowguard.race.calls import Call

__all__ = ["Mismatch", "Raised", "exception_kind", "normalise", "reference", "run_one"]

@dataclass(frozen=True)
class Mismatch:
    """One wrong result, kept as short strings (results can be large)."""

    shape: str
    call: str
    expected: str
    got: str


@dataclass(frozen=True)
class Raised:
    """A normalised exception: its type name and message (a distinct type, so no output can equal it)."""

    type: str
    message: str

    @property
    def kind(self) -> str:
        """'Already borrowed', 'Truncation error', or the exception's type name."""
        if "Already borrowed" in self.message:
            return "Already borrowed"
        if self.message.startswith("Truncation error"):
            return "Truncation error"
        return self.type


def exception_kind(exc: BaseException) -> str:
    """'Already borrowed', 'Truncation error', or the exception's type name."""
    return Raised(type(exc).__name__, str(exc)).kind


def normalise(result: Any) -> Any:
    """A hashable, comparable form of any call result, covering every field.

    BatchEncoding: every key (input_ids, attention_mask, token_type_ids, offset_mapping,
    overflowing_tokens, overflow_to_sample_mapping, special_tokens_mask, length, ...) plus each
    encoding's word ids and sequence ids. Arrays become (shape, dtype, digest). An exception
    becomes `Raised(type name, message)`.
    """
    if isinstance(result, BaseException):
        return Raised(type(result).__name__, str(result))
    if isinstance(result, Mapping):  # BatchEncoding and BatchFeature are UserDicts
        fields = tuple(sorted((str(k), _freeze(v)) for k, v in result.items()))
        encodings = getattr(result, "encodings", None)
        if encodings:
            words = tuple(tuple(e.word_ids) for e in encodings)
            seqs = tuple(tuple(e.sequence_ids) for e in encodings)
            return (type(result).__name__, fields, ("word_ids", words), ("sequence_ids", seqs))
        return (type(result).__name__, fields)
    return _freeze(result)


def _freeze(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if hasattr(value, "tobytes") and hasattr(value, "shape"):  # numpy array: digest, not a huge tuple
        return ("array", tuple(value.shape), str(value.dtype), hashlib.sha1(value.tobytes()).hexdigest())
    if hasattr(value, "tolist"):
        return _freeze(value.tolist())
    return repr(value)


def run_one(obj: Any, call: Call) -> Any:
    """One call, normalised; an exception (a pyo3 panic included) is recorded, not raised."""
    try:
        return normalise(call.run(obj))
    except Exception as exc:
        return normalise(exc)
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return normalise(exc)


def reference(obj: Any, calls: Sequence[Call]) -> list[Any]:
    """Serial, single-thread results of `calls`, normalised (exceptions recorded as type and message)."""
    return [run_one(obj, call) for call in calls]
