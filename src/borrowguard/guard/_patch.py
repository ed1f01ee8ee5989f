"""How the guard attaches to transformers: a descriptor for `_tokenizer` and scoped call/mutation methods.

- `_tokenizer` becomes a data descriptor on the fast-tokenizer class. Outside a guarded call it returns the
  real backend, so `DecodeStream`, `tok._tokenizer.encode(...)` and `tok.backend_tokenizer` get the shared
  `tokenizers.Tokenizer`. Inside a guarded call, in that thread only, it returns a shell borrowed from the
  backend's pool (see `_state`): transformers sets truncation/padding on it and encodes through it.
- The encode entry points (`_batch_encode_plus`, `_encode_plus`) open a call scope.
- Runtime mutations (`_add_tokens`, `update_post_processor`) run on a private copy of the backend, which
  then replaces it: calls in flight finish on the old backend, calls that start afterwards see the change,
  and no shared backend is ever written while another thread reads it.
- An object that lends exclusive copies of itself (vLLM's renderer pool, see `integrations._vllm_pool`)
  has its lending methods wrapped in a lending scope: while one runs, in that thread, guarded calls on any
  other instance (the copy it lent, which no other thread holds) skip the guard, since nothing can race
  there and a scope would only add cost. The lender itself stays guarded.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from borrowguard.guard._state import clone_backend, current_backend, existing_state, state_of

ENTRY_METHODS = ("_batch_encode_plus", "_encode_plus")
MUTATING_METHODS = ("_add_tokens", "update_post_processor")
_GUARD_MARK = "__borrowguard_original__"

_tls = threading.local()


def _scopes() -> dict[int, Any]:
    try:
        return _tls.scopes
    except AttributeError:
        scopes = _tls.scopes = {}
        return scopes


class BackendSlot:
    """The `_tokenizer` attribute of a guarded class: the real backend, or this call's shell during a call."""

    def __init__(self, class_default: Any = None) -> None:
        self.class_default = class_default

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self.class_default
        scopes = getattr(_tls, "scopes", None)
        if scopes:
            shell = scopes.get(id(obj))
            if shell is not None:
                return shell
        backend = obj.__dict__.get("_tokenizer", self.class_default)
        if backend is None:
            return None
        return current_backend(backend)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["_tokenizer"] = value

    def __delete__(self, obj: Any) -> None:
        obj.__dict__.pop("_tokenizer", None)


def _entry(self: Any) -> tuple[dict[int, Any], int, Any] | None:
    """This thread's scopes, the instance's key and its current backend; None when no scope should open
    (an entry point nested in another for the same instance, an instance not initialised yet, or a copy
    lent to this thread alone)."""
    scopes = _scopes()
    key = id(self)
    backend = self.__dict__.get("_tokenizer")
    if key in scopes or backend is None:
        return None
    # (the thread-local is read only while some lending scope is open: a miss on it costs ~1 µs per call)
    if _lenders_open:
        lender = getattr(_tls, "lender", None)
        if lender is not None and lender != key:  # a copy lent to this thread alone: nothing to guard
            return None
    return scopes, key, current_backend(backend)


def call_scope(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run `method` with `self._tokenizer` resolving to a borrowed shell, in this thread, for this instance."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        entry = _entry(self)
        if entry is None:
            return method(self, *args, **kwargs)
        scopes, key, backend = entry
        state = state_of(backend)
        shell = scopes[key] = state.acquire()
        try:
            return method(self, *args, **kwargs)
        finally:
            del scopes[key]
            state.release(shell)

    setattr(guarded, _GUARD_MARK, method)
    return guarded


# Lending scopes open in any thread: while none is, guarded calls skip the thread-local lookup.
_lenders_open = 0
_lenders_lock = threading.Lock()


def lending_scope(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run `method` (which borrows an exclusive copy of `self` and calls it) with the guard stepping aside,
    in this thread, for every instance but `self`."""

    @functools.wraps(method)
    def lending(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _lenders_open
        previous = getattr(_tls, "lender", None)
        _tls.lender = id(self)
        with _lenders_lock:
            _lenders_open += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _tls.lender = previous
            with _lenders_lock:
                _lenders_open -= 1

    setattr(lending, _GUARD_MARK, method)
    return lending


# Mutations are rare; one lock for all of them keeps two of them from both copying the same backend.
_mutation_lock = threading.Lock()


def mutation_scope(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a backend-mutating method on a private copy, then make the copy the backend (rebuild and swap)."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        entry = _entry(self)
        if entry is None or existing_state(entry[2]) is None:
            # Nested, or no guarded call has used this backend yet (construction, a tokenizer not shared
            # yet): nothing can be encoding on it through the guard, so the mutation happens in place.
            return method(self, *args, **kwargs)
        scopes, key, _ = entry
        with _mutation_lock:
            backend = current_backend(self.__dict__["_tokenizer"])
            replacement = clone_backend(backend)
            replacement.encode_special_tokens = backend.encode_special_tokens
            scopes[key] = replacement
            try:
                result = method(self, *args, **kwargs)
            finally:
                del scopes[key]
            state_of(backend).replacement = replacement
            self.__dict__["_tokenizer"] = replacement
        return result

    setattr(guarded, _GUARD_MARK, method)
    return guarded


def original(function: Any) -> Any:
    """The method a guard wrapper wraps, or the function itself."""
    return getattr(function, _GUARD_MARK, function)


def is_guarded(function: Any) -> bool:
    return hasattr(function, _GUARD_MARK)


def fast_tokenizer_base() -> type:
    """transformers' base class of every fast tokenizer: TokenizersBackend (5.x) or PreTrainedTokenizerFast (4.x)."""
    try:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        from transformers.tokenization_utils_fast import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast
    return TokenizersBackend


def subclasses(cls: type) -> Iterator[type]:
    seen: set[type] = set()
    stack = list(cls.__subclasses__())
    while stack:
        sub = stack.pop()
        if sub in seen:
            continue
        seen.add(sub)
        yield sub
        stack.extend(sub.__subclasses__())
