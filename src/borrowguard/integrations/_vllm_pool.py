"""vLLM's renderer tokenizer pool (vLLM 0.21 and later), made unnecessary by the guard.

Facts about vLLM (read from every release 0.21.0 → 0.32.0; the shape did not change):

- `vllm.tokenizers.hf.maybe_make_thread_pool(tokenizer, copies=1)` turns a transformers fast tokenizer into a
  `TokenizerPool…` subclass whose nine public methods (`__call__`, `encode`, `decode`, `batch_*`,
  `apply_chat_template`, `convert_*`) run on deep copies taken from a queue; when the queue is empty it
  deep-copies on the request's path and keeps the copy. It leaves alone a tokenizer that is already an
  instance of `vllm.tokenizers.hf.ThreadSafeHFTokenizerMixin`.
- `vllm.renderers.hf` imports that function by name and `HfRenderer.__init__` calls it once, as
  `maybe_make_thread_pool(self.tokenizer, renderer_num_workers + 1)`, after the multimodal processor was
  given the same tokenizer object.

With the guard installed, one shared tokenizer is exact from any number of threads, so the plugin puts
`guard_instead_of_pool` where vLLM's function was: the renderer's tokenizer is protected and marked with
vLLM's mixin (vLLM then treats it as thread-safe), and no deep copy is ever made. When vLLM's shape is not
the one above, vLLM's pool is kept and the plugin says why. `BORROWGUARD_VLLM_POOL=keep` keeps the pool,
and then the guard steps aside for the pool's copies: vLLM lends each copy to one thread at a time, so a
guard scope there is pure cost (measured in bench/vllm_pool.py, arms pool+guard and keep).
`keep_pool_with_exclusive_copies` wraps vLLM's function: after vLLM has built its `TokenizerPool…` class, the
class's own pool-routed methods run in a lending scope (guard/_patch.py), in which the copy they borrow is not
guarded; the tokenizer itself stays guarded for the paths vLLM never routes to its copies (`tokenize`,
`encode_plus`, `_tokenizer`, runtime mutations). (The copies cannot be marked instead: vLLM's cached
tokenizer class reduces to its original, so every copy is rebuilt from an object the plugin never sees.)
"""

from __future__ import annotations

import enum
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from borrowguard._switches import POOL_ENV

__all__ = ["KEEP_VALUES", "PoolChoice", "PoolDecision", "decide_and_apply", "guard_instead_of_pool",
           "keep_pool_with_exclusive_copies"]

KEEP_VALUES = frozenset({"keep"})
"""Values of BORROWGUARD_VLLM_POOL (stripped, lower-cased) that keep vLLM's pool."""

_TOKENIZER_MODULE = "vllm.tokenizers.hf"
_BOUND_IN = ("vllm.tokenizers", "vllm.renderers.hf")  # modules that import the function by name
_FUNCTION = "maybe_make_thread_pool"
_MIXIN = "ThreadSafeHFTokenizerMixin"
_PARAMETERS = ("tokenizer", "copies")
# Names the known function's code uses: the mixin test that lets a marked tokenizer through, the deep copy.
_CODE_NAMES = frozenset({_MIXIN, "deepcopy"})


class PoolChoice(enum.Enum):
    """What the plugin did about vLLM's renderer pool; the value is the log line's wording."""

    REPLACED = "renderer pool replaced by the guarded tokenizer (no deep copies)"
    KEPT_BY_SWITCH = f"renderer pool kept ({POOL_ENV}=keep)"
    KEPT_UNKNOWN = "renderer pool kept: vLLM's pool is not the known shape"
    NO_POOL = "no renderer pool in this vLLM"


@dataclass(frozen=True)
class PoolDecision:
    choice: PoolChoice
    reason: str = ""

    def text(self) -> str:
        return f"{self.choice.value} ({self.reason})" if self.reason else self.choice.value


def decide_and_apply(env: Mapping[str, str]) -> PoolDecision | None:
    """In a vLLM process with the guard installed: replace vLLM's pool, or keep it and say why.

    None outside vLLM (vllm not imported: nothing to decide). Never raises: a surprise keeps vLLM's pool.
    """
    if "vllm" not in sys.modules:
        return None
    try:
        import importlib

        module = importlib.import_module(_TOKENIZER_MODULE)
    except Exception as exc:  # an older vLLM without this module, or one that fails to import it here
        return PoolDecision(PoolChoice.NO_POOL, f"{_TOKENIZER_MODULE} not importable: {type(exc).__name__}")
    function = getattr(module, _FUNCTION, None)
    if function is None:
        return PoolDecision(PoolChoice.NO_POOL)
    if function is guard_instead_of_pool:
        return PoolDecision(PoolChoice.REPLACED)
    if getattr(function, _KEEPING, None) is not None:
        return PoolDecision(PoolChoice.KEPT_BY_SWITCH)
    why = _unknown_shape(module, function)
    keep = env.get(POOL_ENV, "").strip().lower() in KEEP_VALUES
    if why:
        if keep:
            return PoolDecision(PoolChoice.KEPT_BY_SWITCH, f"its copies guarded: {why}")
        return PoolDecision(PoolChoice.KEPT_UNKNOWN, why)
    global _mixin
    _mixin = module.__dict__[_MIXIN]
    replacement = keep_pool_with_exclusive_copies(function) if keep else guard_instead_of_pool
    for name in (_TOKENIZER_MODULE, *_BOUND_IN):
        bound = sys.modules.get(name)
        if bound is not None and bound.__dict__.get(_FUNCTION) is function:
            setattr(bound, _FUNCTION, replacement)
    return PoolDecision(PoolChoice.KEPT_BY_SWITCH if keep else PoolChoice.REPLACED)


def _unknown_shape(module: Any, function: Callable[..., Any]) -> str:
    """Why vLLM's pool is not the one this module knows ("" when it is)."""
    mixin = module.__dict__.get(_MIXIN)
    if not isinstance(mixin, type):
        return f"{_TOKENIZER_MODULE}.{_MIXIN} is missing"
    try:
        parameters = tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return f"{_FUNCTION} has no readable signature"
    if parameters != _PARAMETERS:
        return f"{_FUNCTION}{parameters} instead of {_FUNCTION}{_PARAMETERS}"
    code = getattr(function, "__code__", None)
    missing = _CODE_NAMES - set(getattr(code, "co_names", ()))
    if missing:
        return f"{_FUNCTION} no longer uses {', '.join(sorted(missing))}"
    for name in _BOUND_IN:
        bound = sys.modules.get(name)
        if bound is not None and bound.__dict__.get(_FUNCTION, function) is not function:
            return f"{name}.{_FUNCTION} is not {_TOKENIZER_MODULE}'s"
    return ""


_mixin: type | None = None
_marked_classes: dict[type, type] = {}
_KEEPING = "__borrowguard_keeps__"  # on keep_pool_with_exclusive_copies' wrapper: vLLM's own function
# The methods vLLM's pool routes to a borrowed copy (the same nine in every release 0.21.0 → 0.32.0).
_LENDING = ("__call__", "encode", "decode", "batch_encode", "batch_decode", "apply_chat_template",
            "convert_tokens_to_ids", "convert_ids_to_tokens", "convert_tokens_to_string")


def keep_pool_with_exclusive_copies(function: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's `maybe_make_thread_pool`, whose copies the guard steps aside for (see the module docstring)."""

    def maybe_make_thread_pool(tokenizer: Any, copies: int = 1) -> Any:
        from borrowguard.guard._patch import is_guarded, lending_scope

        before = type(tokenizer)
        result = function(tokenizer, copies)
        pool = type(tokenizer)
        mixin = _mixin
        # Only a class vLLM's function has just made for this tokenizer (its subclass, marked thread-safe).
        if result is tokenizer and pool is not before and mixin is not None and issubclass(pool, mixin) \
                and issubclass(pool, before):
            for name in _LENDING:
                method = pool.__dict__.get(name)
                if callable(method) and not is_guarded(method):
                    setattr(pool, name, lending_scope(method))
        return result

    maybe_make_thread_pool.__wrapped__ = function  # type: ignore[attr-defined]
    maybe_make_thread_pool.__doc__ = function.__doc__
    setattr(maybe_make_thread_pool, _KEEPING, function)
    return maybe_make_thread_pool


def guard_instead_of_pool(tokenizer: Any, copies: int = 1) -> Any:
    """Where vLLM would build its pool: protect `tokenizer` in place and mark it thread-safe. No copies.

    Same contract as vLLM's function: changes the object in place, returns it, and leaves anything that is
    not a transformers fast tokenizer (or is marked already) as it is. `copies` is accepted and unused.
    """
    from borrowguard.guard import protect
    from borrowguard.guard._patch import fast_tokenizer_base

    mixin = _mixin
    if mixin is None or not isinstance(tokenizer, fast_tokenizer_base()) or isinstance(tokenizer, mixin):
        return tokenizer
    plain = type(tokenizer)
    protect(tokenizer)
    tokenizer.__class__ = _marked_class(type(tokenizer), plain, mixin)
    return tokenizer


def _marked_class(guarded: type, plain: type, mixin: type) -> type:
    marked = _marked_classes.get(guarded)
    if marked is None:

        def __reduce_ex__(self: Any, protocol: int) -> Any:
            # Pickled as the tokenizer vLLM had before us (its own class reduces it), re-marked on load.
            unmarked = object.__new__(plain)
            unmarked.__dict__.update(self.__dict__)
            return (guard_instead_of_pool, (unmarked,))

        namespace = {"__module__": plain.__module__, "__qualname__": plain.__qualname__,
                     "__reduce_ex__": __reduce_ex__}
        # Same name as vLLM's class (save_pretrained and vLLM's own logs see no difference).
        marked = _marked_classes[guarded] = type(plain.__name__, (guarded, mixin), namespace)
    return marked
