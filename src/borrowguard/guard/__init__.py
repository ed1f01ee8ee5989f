"""The guard: exact, lock-free thread safety for Hugging Face fast tokenizers.

No shared `tokenizers.Tokenizer` is mutated on the call path. During a guarded call, transformers talks to
a shell borrowed from a pool: a tokenizer that shares the backend's model and components but owns its
truncation, padding and special-token mode (see `_state`). Imports transformers only when used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from borrowguard.errors import GuardError
from borrowguard.guard._patch import (
    ENTRY_METHODS,
    MUTATING_METHODS,
    BackendSlot,
    call_scope,
    fast_tokenizer_base,
    is_guarded,
    mutation_scope,
    original,
    subclasses,
)

__all__ = ["install", "is_installed", "protect", "uninstall"]

T = TypeVar("T")
_MISSING = object()
_lock = threading.RLock()
# (class, attribute, previous value in the class __dict__ or _MISSING) for everything install() changed.
_patched: list[tuple[type, str, Any]] = []
_guarded_classes: dict[type, type] = {}


def _set(cls: type, name: str, value: Any) -> None:
    _patched.append((cls, name, cls.__dict__.get(name, _MISSING)))
    setattr(cls, name, value)


def _wrapped(lookup: Callable[[str], Any]) -> dict[str, Any]:
    """Guard wrappers for the entry points and mutators that `lookup` finds, around their originals."""
    wrapped = {}
    for names, wrap in ((ENTRY_METHODS, call_scope), (MUTATING_METHODS, mutation_scope)):
        for name in names:
            method = lookup(name)
            if callable(method):
                wrapped[name] = wrap(original(method))
    return wrapped


def _patch_methods(cls: type) -> None:
    """Wrap the entry points and mutators that `cls` itself defines (inherited ones are wrapped where defined)."""
    for name, wrapper in _wrapped(lambda name: _unguarded(cls.__dict__.get(name))).items():
        _set(cls, name, wrapper)


def _unguarded(method: Any) -> Any:
    return None if is_guarded(method) else method


def install() -> None:
    """Make every transformers fast tokenizer in this process safe and exact under concurrency.

    Covers instances created before and after the call, and every subclass (Bert, Qwen2, Llama, GPT-2 ...).
    Idempotent and thread-safe. Raises GuardError when transformers is not importable.
    """
    with _lock:
        if _patched:
            return
        try:
            base = fast_tokenizer_base()
        except ImportError as exc:
            raise GuardError(f"borrowguard.install() needs transformers with fast tokenizers: {exc}") from exc
        _set(base, "_tokenizer", BackendSlot(base.__dict__.get("_tokenizer")))
        _patch_methods(base)
        for sub in subclasses(base):
            _patch_methods(sub)
        # transformers imports model tokenizer modules lazily: classes defined later get the same treatment.
        _set(base, "__init_subclass__", _subclass_hook(base))


def _subclass_hook(base: type) -> classmethod:
    """`base.__init_subclass__` that guards each new subclass, after whatever `base` itself did there."""
    previous = base.__dict__.get("__init_subclass__")  # a classmethod when the class defines one

    def hook(cls: type, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)  # type: ignore[misc]
        with _lock:
            if _patched:
                _patch_methods(cls)

    return classmethod(hook)


def uninstall() -> None:
    """Undo install(): transformers' classes get back exactly what they had. protect()ed objects stay guarded."""
    with _lock:
        while _patched:
            cls, name, previous = _patched.pop()
            if previous is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, previous)


def is_installed() -> bool:
    """Whether install() is in effect."""
    return bool(_patched)


def _reduce_as_original(self: Any, protocol: int) -> Any:
    """Pickle and deepcopy a protected tokenizer as an ordinary instance of its original class."""
    state = self.__getstate__() if hasattr(self, "__getstate__") else dict(self.__dict__)
    return (_rebuild, (_original_class(type(self)), state))


def _rebuild(cls: type, state: Any) -> Any:
    obj = cls.__new__(cls)
    if hasattr(obj, "__setstate__"):
        obj.__setstate__(state)
    else:
        obj.__dict__.update(state)
    return obj


def _original_class(cls: type) -> type:
    return cls.__dict__.get("_borrowguard_original_class", cls)


def _guarded_class(cls: type) -> type:
    with _lock:
        guarded = _guarded_classes.get(cls)
        if guarded is None:
            namespace: dict[str, Any] = {
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__reduce_ex__": _reduce_as_original,
                "_borrowguard_original_class": cls,
                "_tokenizer": BackendSlot(None),
            }
            # Around the originals: a protected object stays guarded after uninstall(), and is not wrapped twice.
            namespace.update(_wrapped(lambda name: getattr(cls, name, None)))
            # Same name, so save_pretrained records the original tokenizer_class.
            guarded = _guarded_classes[cls] = type(cls.__name__, (cls,), namespace)
        return guarded


def protect(obj: T) -> T:
    """Make one fast tokenizer, or a processor and its tokenizer, safe without a global patch. Returns obj.

    Raises GuardError when `obj` is neither a fast tokenizer nor an object with a fast `.tokenizer`.
    """
    base = fast_tokenizer_base()
    if isinstance(obj, base):
        cls = type(obj)
        if "_borrowguard_original_class" not in cls.__dict__:
            obj.__class__ = _guarded_class(cls)
        return obj
    tokenizer = getattr(obj, "tokenizer", None)
    if isinstance(tokenizer, base):
        protect(tokenizer)
        return obj
    raise GuardError(
        f"protect() takes a Hugging Face fast tokenizer or a processor holding one, not {type(obj).__name__}"
    )
