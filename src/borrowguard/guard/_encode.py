"""Truncation and padding done on the encodings instead of on a shared backend.

These functions reproduce what `tokenizers.Tokenizer.encode_batch` does when truncation and padding are
enabled on the backend, using only operations that never mutate the backend: `Encoding.truncate`,
`Tokenizer.post_process` (on a backend that has neither truncation nor padding set) and `Encoding.pad`.
The order is the backend's own: truncate each side (leaving room for special tokens), post-process,
then pad the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Messages of tokenizers' TruncationError, raised as a plain Exception by the bindings.
SECOND_SEQUENCE_NOT_PROVIDED = "Truncation error: Second sequence not provided"
SEQUENCE_TOO_SHORT = "Truncation error: Sequence to truncate too short to respect the provided max_length"


def effective_max_length(max_length: int, n_added: int) -> int | None:
    """The room left for the sequences once special tokens are added; None means "no limit".

    The backend computes `max_length - n_added` in unsigned arithmetic: when the special tokens alone
    exceed max_length the subtraction wraps around and nothing is truncated.
    """
    if n_added <= 0:
        return max_length
    if max_length < n_added:
        return None
    return max_length - n_added


def truncate_single(encoding: Any, limit: int | None, trunc: Mapping[str, Any]) -> None:
    """Truncate one sequence in place, as the backend does for an input without a pair."""
    if limit is None:
        return
    stride, direction = trunc["stride"], trunc["direction"]
    if limit == 0:
        encoding.truncate(0, stride, direction)
        return
    length = len(encoding.ids)
    if length <= limit:
        return
    if trunc["strategy"] == "only_second":
        raise Exception(SECOND_SEQUENCE_NOT_PROVIDED)
    encoding.truncate(limit, stride, direction)


def truncate_pair(first: Any, second: Any, limit: int | None, trunc: Mapping[str, Any]) -> None:
    """Truncate both sides of a pair in place, as the backend does (longest_first / only_first / only_second)."""
    if limit is None:
        return
    stride, direction = trunc["stride"], trunc["direction"]
    if limit == 0:
        first.truncate(0, stride, direction)
        second.truncate(0, stride, direction)
        return
    n1, n2 = len(first.ids), len(second.ids)
    total = n1 + n2
    if total <= limit:
        return
    to_remove = total - limit
    strategy = trunc["strategy"]
    if strategy == "longest_first":
        short, long_ = (n2, n1) if n1 > n2 else (n1, n2)
        long_ = short if short > limit else max(short, limit - short)
        if short + long_ > limit:
            short = limit // 2
            long_ = short + limit % 2
        t1, t2 = (long_, short) if n1 > n2 else (short, long_)
        first.truncate(t1, stride, direction)
        second.truncate(t2, stride, direction)
        return
    target = first if strategy == "only_first" else second
    target_len = len(target.ids)
    if target_len <= to_remove:
        raise Exception(SEQUENCE_TOO_SHORT)
    target.truncate(target_len - to_remove, stride, direction)


def pad_batch(encodings: Sequence[Any], pad: Mapping[str, Any]) -> None:
    """Pad every encoding (and its overflowing windows) in place to the batch's target length."""
    if not encodings:
        return
    length = pad.get("length")
    if length is None:
        length = max(len(e.ids) for e in encodings)
    multiple = pad.get("pad_to_multiple_of")
    if multiple and length % multiple:
        length += multiple - length % multiple
    direction, pad_id = pad["direction"], pad["pad_id"]
    pad_type_id, pad_token = pad["pad_type_id"], pad["pad_token"]
    for encoding in encodings:
        encoding.pad(length, direction=direction, pad_id=pad_id, pad_type_id=pad_type_id, pad_token=pad_token)
