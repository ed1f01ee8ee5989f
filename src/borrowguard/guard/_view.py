"""The per-call stand-in for a fast tokenizer's `_tokenizer` during a guarded call.

transformers' call path reads the backend's truncation/padding, calls `enable_*`/`no_*` when the call's
settings differ, may flip `encode_special_tokens`, then calls `encode_batch`. On a shared backend those
writes are the race. The view records them instead (validated exactly as the backend validates them) and
implements `encode_batch` with the settings applied to the encodings, never to the backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from borrowguard.guard._encode import effective_max_length, pad_batch, truncate_pair, truncate_single
from borrowguard.guard._state import BackendState

_SINGLE = -1


def _layout(inputs: Sequence[Any], is_pretokenized: bool) -> tuple[list[Any], list[int]] | None:
    """Flatten a batch into sequences encodable one by one; None when an input's shape is ambiguous.

    For each input the layout holds _SINGLE, or the index of its second sequence in the flat list.
    """
    flat: list[Any] = []
    layout: list[int] = []
    for item in inputs:
        if is_pretokenized:
            if type(item) is list and all(type(w) is str for w in item):
                flat.append(item)
                layout.append(_SINGLE)
                continue
            if (
                type(item) in (tuple, list)
                and len(item) == 2
                and all(type(side) is list and all(type(w) is str for w in side) for side in item)
            ):
                flat.extend(item)
                layout.append(len(flat) - 1)
                continue
            return None
        if type(item) is str:
            flat.append(item)
            layout.append(_SINGLE)
        elif type(item) in (tuple, list) and len(item) == 2 and type(item[0]) is str and type(item[1]) is str:
            flat.extend(item)
            layout.append(len(flat) - 1)
        else:
            return None
    return flat, layout


def encode_truncated(
    encoder: Any,
    flat: list[Any],
    layout: list[int],
    trunc: dict[str, Any],
    is_pretokenized: bool,
    add_special_tokens: bool,
) -> list[Any]:
    """Encode without special tokens (one shared, read-only batch call), truncate each input, post-process."""
    encodings = encoder.encode_batch(flat, is_pretokenized=is_pretokenized, add_special_tokens=False)
    max_length = trunc["max_length"]
    limits: dict[bool, int | None] = {}
    out = []
    position = 0
    for second in layout:
        is_pair = second != _SINGLE
        if is_pair not in limits:
            n_added = encoder.num_special_tokens_to_add(is_pair) if add_special_tokens else 0
            limits[is_pair] = effective_max_length(max_length, n_added)
        first = encodings[position]
        if is_pair:
            pair = encodings[second]
            truncate_pair(first, pair, limits[is_pair], trunc)
            position = second + 1
        else:
            pair = None
            truncate_single(first, limits[is_pair], trunc)
            position += 1
        out.append(encoder.post_process(first, pair, add_special_tokens))
    return out


class BackendView:
    """Looks like a `tokenizers.Tokenizer` to transformers' call path; mutates nothing shared."""

    __slots__ = ("_state", "encode_special_tokens", "padding", "truncation")

    def __init__(self, state: BackendState) -> None:
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "truncation", None)
        object.__setattr__(self, "padding", None)
        object.__setattr__(self, "encode_special_tokens", bool(state.backend.encode_special_tokens))

    # -- settings: recorded, validated exactly as the backend would -------------------------------------
    def enable_truncation(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "truncation", self._validated("truncation", args, kwargs))

    def no_truncation(self) -> None:
        object.__setattr__(self, "truncation", None)

    def enable_padding(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "padding", self._validated("padding", args, kwargs))

    def no_padding(self) -> None:
        object.__setattr__(self, "padding", None)

    def _validated(self, kind: str, args: tuple, kwargs: dict) -> dict[str, Any]:
        """The backend's normalised settings for these arguments; raises exactly what `enable_<kind>` raises."""
        state = self._state
        key = (args, kwargs)
        last = state.last_settings.get(kind)
        if last is not None and last[0] == key:
            return last[1]
        with state.validator_lock:  # enable + read back must not interleave with another thread's
            validator = state.validator
            getattr(validator, "enable_" + kind)(*args, **kwargs)
            settings = getattr(validator, kind)
        state.last_settings[kind] = (key, settings)
        return settings

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "encode_special_tokens":
            object.__setattr__(self, name, bool(value))
        else:  # a component setter (post_processor = ...): a real mutation, same as unguarded
            setattr(self._state.backend, name, value)

    def __getattr__(self, name: str) -> Any:
        # Everything else (token_to_id, post_processor, decode ...) reads the shared backend.
        return getattr(self._state.backend, name)

    # -- encoding -------------------------------------------------------------------------------------
    def encode_batch(
        self, input: Sequence[Any], is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> list:
        state = self._state
        trunc, pad = self.truncation, self.padding
        encoder = state.encoder(self.encode_special_tokens)
        if trunc is None:
            encodings = encoder.encode_batch(
                input, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens
            )
            if pad is not None:
                pad_batch(encodings, pad)
            return encodings
        shape = _layout(input, is_pretokenized)
        if shape is None or (len(shape[0]) != len(shape[1]) and not state.pair_fast_ok()):
            return self._encode_serially(input, is_pretokenized, add_special_tokens)
        encodings = encode_truncated(encoder, shape[0], shape[1], trunc, is_pretokenized, add_special_tokens)
        if pad is not None:
            pad_batch(encodings, pad)
        return encodings

    def encode(
        self, sequence: Any, pair: Any = None, is_pretokenized: bool = False, add_special_tokens: bool = True
    ) -> Any:
        item = sequence if pair is None else (sequence, pair)
        return self.encode_batch(
            [item], is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens
        )[0]

    def _encode_serially(self, input: Sequence[Any], is_pretokenized: bool, add_special_tokens: bool) -> list:
        """Exact for any input shape: the settings are applied to a private copy, one call at a time."""
        state = self._state
        with state.serial_lock:
            backend = state.serial_backend()
            apply_settings(backend, self.truncation, self.padding, self.encode_special_tokens)
            return backend.encode_batch(
                input, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens
            )


def apply_settings(backend: Any, trunc: dict | None, pad: dict | None, split_special_tokens: bool) -> None:
    if trunc is None:
        backend.no_truncation()
    else:
        backend.enable_truncation(**trunc)
    if pad is None:
        backend.no_padding()
    else:
        backend.enable_padding(**pad)
    backend.encode_special_tokens = split_special_tokens
