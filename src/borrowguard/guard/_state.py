"""What the guard keeps for each Rust backend (`tokenizers.Tokenizer`): a pool of shells.

A shell is a `tokenizers.Tokenizer` built around the backend's own model, normalizer, pre-tokenizer,
post-processor and decoder — the same objects, shared, not copies (the bindings hold them behind Arcs) —
plus its own added-token table, truncation, padding and `encode_special_tokens`. A guarded call borrows a
shell for its duration, so the settings transformers writes on every call land on an object no other
thread is using, and `encode_batch` still runs entirely in Rust with the GIL released. A shell costs the
added-token table, not the vocabulary, and the pool only grows to the number of calls in flight.

The state rides on the backend object itself, so shallow copies of a tokenizer (vLLM's cached tokenizer
classes share one backend) share it too, and pickling or deep-copying a backend drops it.
"""

from __future__ import annotations

import threading
from typing import Any

_ATTR = "_borrowguard_state"
_COMPONENTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")
_CREATE_LOCK = threading.Lock()


def clone_backend(backend: Any) -> Any:
    """A private, independent copy of a backend. `to_str` only reads, so it is safe while others encode."""
    return type(backend).from_str(backend.to_str())


def make_shell(backend: Any) -> Any:
    """A tokenizer sharing `backend`'s components, with its own settings and an identical added vocabulary."""
    added = sorted(backend.get_added_tokens_decoder().items())
    # One call, each token carrying its own specialness: the added-token matchers are rebuilt once, not once
    # per run of equal specialness (DeepSeek V4's 1,283 added tokens in 5 runs: 8 ms instead of 40-135 ms, paid
    # on the request path whenever more calls are in flight than shells were ever needed).
    shell = _bare_shell(backend)
    shell.add_tokens([token for _, token in added])
    if _same_vocabulary(shell, backend, added):
        return shell
    # Added tokens in id order, in runs of equal specialness: ids come out as the backend assigned them.
    shell = _bare_shell(backend)
    run: list[Any] = []
    for _, token in added:
        if run and run[-1].special != token.special:
            _add(shell, run)
            run = []
        run.append(token)
    if run:
        _add(shell, run)
    if not _same_vocabulary(shell, backend, added):
        # An unusual history of added tokens: rebuild from the serialised form, then share the components.
        shell = clone_backend(backend)
        shell.model = backend.model
        _share_components(shell, backend)
        shell.encode_special_tokens = backend.encode_special_tokens
    return shell


def _bare_shell(backend: Any) -> Any:
    shell = type(backend)(backend.model)
    _share_components(shell, backend)
    shell.encode_special_tokens = backend.encode_special_tokens
    return shell


def _share_components(shell: Any, backend: Any) -> None:
    for name in _COMPONENTS:
        component = getattr(backend, name)
        if component is not None:
            setattr(shell, name, component)


def _add(shell: Any, tokens: list[Any]) -> None:
    if tokens[0].special:
        shell.add_special_tokens(tokens)
    else:
        shell.add_tokens(tokens)


def _same_vocabulary(shell: Any, backend: Any, added: list[tuple[int, Any]]) -> bool:
    """Same ids for every added token, and the same specialness (what decoding skips: asked of decoding itself,
    not of the tokens' flags, since the set it reads is what `add_special_tokens` fills)."""
    # Both share one model, so the same added ids make the same vocabulary (get_vocab_size(with_added_tokens)
    # would build the whole vocabulary on tokenizers 0.22: 76 ms for 129k entries, twice).
    ids = [token_id for token_id, _ in added]  # sorted already: `added` is in id order
    if sorted(shell.get_added_tokens_decoder()) != ids:
        return False
    if not all(shell.token_to_id(token.content) == token_id for token_id, token in added):
        return False
    return shell.decode(ids, skip_special_tokens=True) == backend.decode(ids, skip_special_tokens=True)


class BackendState:
    """Per-backend pool of shells, created on the first guarded call that uses the backend."""

    __slots__ = ("_free", "backend", "replacement")

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.replacement: Any = None
        self._free: list[Any] = []

    def acquire(self) -> Any:
        # list.pop/append are atomic under the GIL: no lock on the call path.
        try:
            return self._free.pop()
        except IndexError:
            return make_shell(self.backend)

    def release(self, shell: Any) -> None:
        self._free.append(shell)

    @property
    def pooled(self) -> int:
        """Shells waiting in the pool (diagnostics and tests)."""
        return len(self._free)


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
