"""What the guard keeps for each Rust backend (`tokenizers.Tokenizer`).

The state rides on the backend object itself, so shallow copies of a tokenizer (vLLM's cached tokenizer
classes share one backend) share it too, and pickling or deep-copying a backend drops it: a copy is a
fresh, ordinary backend.
"""

from __future__ import annotations

import threading
from typing import Any

_ATTR = "_borrowguard_state"
_CREATE_LOCK = threading.Lock()


def clone_backend(backend: Any) -> Any:
    """A private copy of a backend. `to_str` only reads, so it is safe while other threads encode."""
    return type(backend).from_str(backend.to_str())


def _is_normalised(backend: Any) -> bool:
    return backend.truncation is None and backend.padding is None


class BackendState:
    """Per-backend helpers, created once, under a lock, the first time a guarded call uses the backend."""

    __slots__ = (
        "_lazy_lock",
        "_pair_fast",
        "_serial",
        "_split",
        "backend",
        "last_settings",
        "mutation_lock",
        "replacement",
        "serial_lock",
        "validator",
        "validator_lock",
    )

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        # A tiny tokenizer sharing only the post-processor: enable_truncation / enable_padding validate their
        # arguments on it (same errors, same normalised settings) without touching the shared backend.
        validator = type(backend)(_empty_model())
        if backend.post_processor is not None:
            validator.post_processor = backend.post_processor
        self.validator = validator
        self.validator_lock = threading.Lock()
        # "truncation"/"padding" -> (arguments, normalised settings) of the last validation: most calls repeat.
        self.last_settings: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.mutation_lock = threading.Lock()
        self.serial_lock = threading.Lock()
        self.replacement: Any = None
        self._lazy_lock = threading.Lock()
        self._split: Any = None
        self._serial: Any = None
        self._pair_fast: bool | None = None

    # -- normalised backends ------------------------------------------------------------------------
    def encoder(self, split_special_tokens: bool) -> Any:
        """The backend to encode with: never holds truncation or padding, and has the wanted special-token mode."""
        backend = self.backend
        if not _is_normalised(backend):
            self._normalise()
            backend = self.backend
        if bool(backend.encode_special_tokens) == split_special_tokens:
            return backend
        # The opposite mode lives in one lazily made copy, so the shared backend is never flipped per call.
        split = self._split
        if split is None:
            with self._lazy_lock:
                split = self._split
                if split is None:
                    split = clone_backend(backend)
                    split.encode_special_tokens = split_special_tokens
                    self._split = split
        return split

    def _normalise(self) -> None:
        # Leftover settings from unguarded calls (or direct backend users). Clearing them is a mutation, but a
        # rare one; if a direct user holds a borrow right now we keep encoding on a normalised copy instead.
        with self._lazy_lock:
            backend = self.backend
            if _is_normalised(backend):
                return
            try:
                backend.no_truncation()
                backend.no_padding()
            except RuntimeError:
                copy = clone_backend(backend)
                copy.no_truncation()
                copy.no_padding()
                copy.encode_special_tokens = backend.encode_special_tokens
                self.backend = copy

    # -- the exact serial path ----------------------------------------------------------------------
    def serial_backend(self) -> Any:
        """A private copy on which settings may be set, used under `serial_lock` for rare input shapes."""
        serial = self._serial
        if serial is None:
            with self._lazy_lock:
                serial = self._serial
                if serial is None:
                    serial = self._serial = clone_backend(self.backend)
        return serial

    def pair_fast_ok(self) -> bool:
        """Whether pairs encoded side by side and post-processed equal the backend's own pair encoding."""
        ok = self._pair_fast
        if ok is None:
            from borrowguard.guard._probe import pairs_match

            ok = self._pair_fast = pairs_match(self)
        return ok


def _empty_model() -> Any:
    from tokenizers import models

    return models.BPE()


def state_of(backend: Any) -> BackendState:
    state = getattr(backend, _ATTR, None)
    if state is None:
        with _CREATE_LOCK:
            state = getattr(backend, _ATTR, None)
            if state is None:
                state = BackendState(backend)
                setattr(backend, _ATTR, state)
    return state


def existing_state(backend: Any) -> BackendState | None:
    return getattr(backend, _ATTR, None)


def current_backend(backend: Any) -> Any:
    """Follow replacements made by runtime mutations (add_tokens ...) to the backend calls should use now."""
    state = getattr(backend, _ATTR, None)
    while state is not None and state.replacement is not None:
        backend = state.replacement
        state = getattr(backend, _ATTR, None)
    return backend
