"""Tokenizer calls that collide: every setting a fast tokenizer writes into its shared Rust backend.

    calls = make_calls(tok, random.Random(0), 200)

Calls differ from one another in truncation, padding, stride, sides and split_special_tokens, because
that is what makes threads collide. This module imports neither transformers nor tokenizers: it works on
whatever tokenizer (or processor) it is given; only the "processor" kind needs Pillow, imported lazily.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from borrowguard.data.tools import TOOLS

__all__ = ["ALL_KINDS", "IMAGE_TOKEN", "TOOLS", "Call", "make_calls"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
IMAGE_TOKEN = "<|image_pad|>"


@dataclass(frozen=True)
class Call:
    """One tokenizer (or processor) call: `getattr(target, method)(*args, **kwargs)`.

    `target` names an attribute of the object the workload runs on ("" = the object itself), so a
    processor workload can mix processor calls with calls on `processor.tokenizer`, as servers do.
    """

    shape: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    target: str = ""

    def run(self, obj: Any) -> Any:
        if self.target:
            obj = getattr(obj, self.target)
        return getattr(obj, self.method)(*self.args, **self.kwargs)

    def describe(self, limit: int = 160) -> str:
        """A short human-readable form, for mismatch examples."""
        parts = [short(a, 40) for a in self.args]
        parts += [f"{k}={short(v, 40)}" for k, v in self.kwargs.items()]
        prefix = f"{self.target}." if self.target else ""
        return short(f"{prefix}{self.method}({', '.join(parts)})", limit)


# --------------------------------------------------------------------------------------------- texts

_SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers shared between threads must never see another request's settings.",
    "Please summarise the attached report in three bullet points.",
    "def add(a, b):\n    return a + b  # simple, but it has code tokens",
    "Numbers like 3.14159, 2718 and 1e-9 split in interesting ways.",
    "你好，世界！这是一个用于测试分词器的句子。",
    "Привет, мир! Это предложение для проверки токенизатора.",
    "مرحبا بالعالم، هذه جملة لاختبار المحلل.",
    "こんにちは世界、トークナイザーのテストです。",
    "Emoji too: 🚀🔥✨ and accents: café, naïve, Zürich.",
    "  Leading spaces, trailing tabs\t\tand\nnew lines\n",
    "URLs https://example.com/a?b=c&d=e and e-mail someone@example.org.",
)

_WORDS = tuple(" ".join(_SENTENCES).split())


def _texts(rng: random.Random, specials: Sequence[str]) -> str:
    """A short, medium or long text; long ones exceed any max_length we use, so truncation matters."""
    size = rng.choices(("short", "medium", "long"), weights=(3, 3, 2))[0]
    count = {"short": 1, "medium": rng.randint(2, 4), "long": rng.randint(8, 16)}[size]
    parts = [rng.choice(_SENTENCES) for _ in range(count)]
    if specials and rng.random() < 0.3:  # special tokens inside text: split_special_tokens changes them
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(specials))
    return " ".join(parts)


def _short_text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


# ------------------------------------------------------------------------------------- call builders

ALL_KINDS = (
    "single",
    "pair",
    "batch",
    "split-words",
    "overflow",
    "encode",
    "chat",
    "chat+tools",
    "decode",
    "batch-decode",
    "convert",
    "processor",
)

# Mutating calls (settings differ) dominate, as in a server; pure reads are the victims.
_WEIGHTS = {
    "single": 4,
    "pair": 3,
    "batch": 3,
    "split-words": 1,
    "overflow": 2,
    "encode": 1,
    "chat": 2,
    "chat+tools": 2,
    "decode": 1,
    "batch-decode": 1,
    "convert": 1,
    "processor": 3,
}

class _Builder:
    """Draws call kwargs; knows which options this tokenizer and this transformers accept."""

    def __init__(self, tokenizer: Any, rng: random.Random) -> None:
        self.tok = tokenizer
        self.rng = rng
        self.specials = [t for t in getattr(tokenizer, "all_special_tokens", []) if t]
        self.vocab = max(1, len(tokenizer))
        self.has_pad = getattr(tokenizer, "pad_token", None) is not None
        self.n_special_pair = _safe_int(lambda: tokenizer.num_special_tokens_to_add(pair=True))
        self.n_special_single = _safe_int(lambda: tokenizer.num_special_tokens_to_add(pair=False))
        # transformers 4.57 rejects truncation_side as a call kwarg (TypeError); 5.x accepts it.
        self.truncation_side_ok = _accepts(tokenizer, truncation_side="left")

    def text(self) -> str:
        return _texts(self.rng, self.specials)

    def max_length(self, pair: bool) -> int:
        floor = (self.n_special_pair if pair else self.n_special_single) + 2
        return self.rng.randint(floor, floor + 60)

    def settings(self, *, pair: bool, strategies: Sequence[Any]) -> dict[str, Any]:
        """Per-call truncation/padding/sides/return flags, each present or absent at random."""
        r = self.rng
        kw: dict[str, Any] = {}
        truncation = r.choice(strategies)
        if truncation is not None:
            kw["truncation"] = truncation
            if truncation is not False:
                kw["max_length"] = self.max_length(pair)
                if self.truncation_side_ok and r.random() < 0.3:
                    kw["truncation_side"] = r.choice(("left", "right"))
        if self.has_pad and r.random() < 0.5:
            padding = r.choice((True, "longest", "max_length"))
            kw["padding"] = padding
            if padding == "max_length":
                kw.setdefault("max_length", self.max_length(pair))
            if r.random() < 0.4:
                multiple = r.choice((4, 8, 16))
                kw["pad_to_multiple_of"] = multiple
                # transformers rejects a max_length that is not a multiple; keep that error rare
                if "max_length" in kw and r.random() < 0.9:
                    kw["max_length"] = -(-kw["max_length"] // multiple) * multiple
            if r.random() < 0.5:
                kw["padding_side"] = r.choice(("left", "right"))
        if r.random() < 0.2:
            kw["add_special_tokens"] = False
        if self.specials and r.random() < 0.2:
            kw["split_special_tokens"] = True
        for flag in ("return_offsets_mapping", "return_special_tokens_mask", "return_length"):
            if r.random() < 0.3:
                kw[flag] = True
        return kw

    def ids(self) -> list[int]:
        return [self.rng.randrange(self.vocab) for _ in range(self.rng.randint(1, 40))]

    # one method per shape ---------------------------------------------------------------------

    def single(self) -> Call:
        kw = self.settings(pair=False, strategies=(None, True, "longest_first", False))
        return Call("single", "__call__", (self.text(),), MappingProxyType(kw))

    def pair(self) -> Call:
        # only_second with a short second side legitimately raises; the reference records that.
        kw = self.settings(pair=True, strategies=(True, "longest_first", "only_first", "only_second", False))
        second = self.text() if self.rng.random() < 0.7 else _short_text(self.rng)
        return Call("pair", "__call__", (self.text(), second), MappingProxyType(kw))

    def batch(self) -> Call:
        n = self.rng.randint(2, 5)
        texts = [self.text() for _ in range(n)]
        if self.rng.random() < 0.4:
            kw = self.settings(pair=True, strategies=(True, "longest_first", "only_first", "only_second"))
            pairs = [self.text() for _ in range(n)]
            return Call("batch", "__call__", (texts, pairs), MappingProxyType(kw))
        kw = self.settings(pair=False, strategies=(None, True, "longest_first", False))
        return Call("batch", "__call__", (texts,), MappingProxyType(kw))

    def split_words(self) -> Call:
        kw = self.settings(pair=False, strategies=(None, True, False))
        kw.pop("split_special_tokens", None)
        kw["is_split_into_words"] = True
        words = self.text().split() or ["empty"]
        if self.rng.random() < 0.5:
            return Call("split-words", "__call__", (words,), MappingProxyType(kw))
        return Call("split-words", "__call__", ([words, self.text().split() or ["x"]],), MappingProxyType(kw))

    def overflow(self) -> Call:
        pair = self.rng.random() < 0.3
        kw = self.settings(pair=pair, strategies=("only_first",) if pair else (True, "longest_first"))
        kw["stride"] = self.rng.randint(0, 3)
        kw["return_overflowing_tokens"] = True
        kw.pop("pad_to_multiple_of", None)
        if self.rng.random() < 0.5:
            kw.pop("padding", None)
        if pair:
            # The window left for the first side must exceed the stride, or tokenizers panics.
            second = _short_text(self.rng)
            room = len(self.tok(second, add_special_tokens=False)["input_ids"]) + self.n_special_pair
            kw["max_length"] = room + kw["stride"] + self.rng.randint(2, 40)
            args: tuple[Any, ...] = (self.text(), second)
        else:
            kw["max_length"] = self.max_length(pair) + 4
            args = (self.text(),)
        return Call("overflow", "__call__", args, MappingProxyType(kw))

    def encode(self) -> Call:
        kw: dict[str, Any] = {}
        if self.rng.random() < 0.6:
            kw["truncation"] = True
            kw["max_length"] = self.max_length(False)
        if self.rng.random() < 0.3:
            kw["add_special_tokens"] = False
        return Call("encode", "encode", (self.text(),), MappingProxyType(kw))

    def chat(self, tools: bool) -> Call:
        r = self.rng
        messages: list[dict[str, Any]] = []
        if r.random() < 0.5:
            messages.append({"role": "system", "content": "You are terse."})
        for _ in range(r.randint(1, 3)):
            if r.random() < 0.3:  # an image part, as in multimodal chats
                content: Any = [{"type": "image"}, {"type": "text", "text": self.text()}]
            else:
                content = self.text()
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": _short_text(r)})
        kw: dict[str, Any] = {"tokenize": True, "add_generation_prompt": True}
        if tools:
            kw["tools"] = list(TOOLS)
            messages[-1] = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                 "arguments": {"city": r.choice(_WORDS)}}}],
            }
            messages.append({"role": "tool", "content": '{"temperature": 21}'})
        else:
            messages.pop()
        shape = "chat+tools" if tools else "chat"
        return Call(shape, "apply_chat_template", (messages,), MappingProxyType(kw))

    def decode(self) -> Call:
        kw = {"skip_special_tokens": self.rng.random() < 0.5}
        return Call("decode", "decode", (self.ids(),), MappingProxyType(kw))

    def batch_decode(self) -> Call:
        seqs = [self.ids() for _ in range(self.rng.randint(2, 5))]
        return Call("batch-decode", "batch_decode", (seqs,), MappingProxyType({}))

    def convert(self) -> Call:
        ids = self.ids()
        if self.rng.random() < 0.5:
            return Call("convert", "convert_ids_to_tokens", (ids,))
        tokens = [t for t in self.tok.convert_ids_to_tokens(ids) if t is not None]
        return Call("convert", "convert_tokens_to_ids", (tokens,))


class _ProcessorBuilder:
    """Multimodal processor calls: the processor tokenizes with truncation/padding off, mixed in with
    plain tokenizer calls on the same `processor.tokenizer`, as in vLLM's multimodal path."""

    def __init__(self, builder: _Builder) -> None:
        from PIL import Image  # Pillow: only needed for processor workloads

        self.b = builder
        self.images = [
            Image.new("RGB", (size, size), color)
            for size, color in ((56, (200, 30, 30)), (84, (30, 200, 30)), (112, (30, 30, 200)))
        ]
        self.image_token = f"<|vision_start|>{IMAGE_TOKEN}<|vision_end|>"

    def call(self) -> Call:
        r = self.b.rng
        n = r.randint(1, 2)
        # No special tokens inside the text: a stray <|image_pad|> would not match the images.
        texts = [f"{self.image_token}{_texts(r, ())}" for _ in range(n)]
        images = [r.choice(self.images) for _ in range(n)]
        kw: dict[str, Any] = {"text": texts, "images": images}
        if n > 1 or r.random() < 0.3:
            kw["padding"] = True
        return Call("processor", "__call__", (), MappingProxyType(kw))


def make_calls(
    obj: Any,
    rng: random.Random,
    n: int,
    *,
    kinds: Iterable[str] | None = None,
) -> list[Call]:
    """Draw `n` calls for a fast tokenizer, or for a processor (then calls target both it and its tokenizer).

    `kinds` restricts the shapes (default: every shape this object supports; chat shapes need a chat
    template, "processor" needs a processor). The same seed gives the same calls.
    """
    is_processor = hasattr(obj, "tokenizer") and hasattr(obj, "image_processor")
    tokenizer = obj.tokenizer if is_processor else obj
    wanted = tuple(ALL_KINDS if kinds is None else kinds)
    unknown = set(wanted) - set(ALL_KINDS)
    if unknown:
        raise ValueError(f"unknown call kinds {sorted(unknown)}; known: {', '.join(ALL_KINDS)}")
    has_template = bool(getattr(tokenizer, "chat_template", None))
    available = [
        k
        for k in wanted
        if (k not in ("chat", "chat+tools") or has_template) and (k != "processor" or is_processor)
    ]
    if not available:
        raise ValueError(f"none of the kinds {list(wanted)} apply to {type(obj).__name__}")

    b = _Builder(tokenizer, rng)
    proc = _ProcessorBuilder(b) if "processor" in available else None
    builders: dict[str, Callable[[], Call]] = {
        "single": b.single,
        "pair": b.pair,
        "batch": b.batch,
        "split-words": b.split_words,
        "overflow": b.overflow,
        "encode": b.encode,
        "chat": lambda: b.chat(tools=False),
        "chat+tools": lambda: b.chat(tools=True),
        "decode": b.decode,
        "batch-decode": b.batch_decode,
        "convert": b.convert,
    }
    if proc is not None:
        builders["processor"] = proc.call
    weights = [_WEIGHTS[k] for k in available]
    calls = []
    for kind in rng.choices(available, weights=weights, k=n):
        call = builders[kind]()
        if is_processor and kind != "processor":
            call = Call(call.shape, call.method, call.args, call.kwargs, target="tokenizer")
        calls.append(call)
    return calls


def short(value: Any, limit: int) -> str:
    """`repr(value)` (or the string itself) cut to `limit` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _safe_int(fn: Callable[[], int]) -> int:
    try:
        return int(fn())
    except Exception:
        return 0


def _accepts(tokenizer: Any, **kwargs: Any) -> bool:
    try:
        tokenizer("probe", **kwargs)
    except TypeError:
        return False
    except Exception:
        return True
    return True
