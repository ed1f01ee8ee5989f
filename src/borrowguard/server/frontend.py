"""The real front end: chat template, images, tokenizer — on the thread structure that fails in vLLM.

One tokenizer object is shared by
- a pool of `workers` tokenization threads, which render the chat template and tokenize the prompt the
  way vLLM's renderer does: `tokenizer(prompt, add_special_tokens=False, truncation=False)`, or
  `truncation=True, max_length=truncate_prompt_tokens` when the request carries that limit;
- one image thread, which decodes and resizes images, expands the placeholders and tokenizes the
  expanded prompt as a multimodal processor does (`tokenizer([text], padding=..., return_tensors=None)`).

Calls on different threads with different truncation/padding settings are exactly what makes an
unguarded fast tokenizer raise "Already borrowed" (tokenizers <= 0.22) or silently apply one call's
settings to another (>= 0.23.1). Nothing here locks the tokenizer: preventing that is the guard's job.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from borrowguard.errors import ConfigError, UserInputError
from borrowguard.server.images import (
    ImageBounds,
    ImageError,
    fetch_remote,
    is_remote,
    load_bytes,
    patch_count,
)
from borrowguard.server.protocol import ChatRequest, bad

IMAGE_PAD = "<|image_pad|>"
DEFAULT_MAX_MODEL_LEN = 32768
T = TypeVar("T")


def load_tokenizer(path: Path) -> Any:
    """Load a local tokenizer as vLLM does (left truncation side, so a truncated prompt keeps its end)."""
    if not path.is_dir():
        raise UserInputError(f"tokenizer directory not found: {path}")
    from transformers import AutoTokenizer

    try:
        # vLLM's get_tokenizer defaults truncation_side to "left" for truncate_prompt_tokens.
        return AutoTokenizer.from_pretrained(str(path), truncation_side="left", local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"cannot load a tokenizer from {path}: {exc}") from None


@dataclass(frozen=True)
class Prompt:
    token_ids: list[int]


class FrontEnd:
    def __init__(self, tokenizer: Any, workers: int = 4, bounds: ImageBounds | None = None,
                 allow_remote_images: bool = False, allow_remote_name: str = "allow_remote_images") -> None:
        if workers < 1:
            raise ConfigError("workers", "{} must be at least 1")
        self.tokenizer = tokenizer
        self.bounds = bounds or ImageBounds()
        self.allow_remote_images = allow_remote_images
        self.allow_remote_name = allow_remote_name  # how the refusal names the setting (serve: its flag)
        limit = getattr(tokenizer, "model_max_length", None)
        # transformers uses a huge sentinel when the tokenizer does not know its model's context length.
        self.max_model_len = limit if isinstance(limit, int) and 0 < limit < 10**7 else DEFAULT_MAX_MODEL_LEN
        # No prompt that fits the context can be longer than this many characters: each token stands for
        # at most `longest_token` of them. Longer ones are refused before the tokenizer sees them, so a
        # 20 MB message costs a length check, not a minute of tokenizing and gigabytes of token ids.
        # (A normaliser that deletes characters, as WordPiece does with whitespace, could make a longer
        # text fit; a prompt that is mostly whitespace is refused all the same.)
        self.longest_token = _longest_token(tokenizer)
        self.max_prompt_chars = self.max_model_len * self.longest_token
        self._pad_for_processor = "longest" if getattr(tokenizer, "pad_token", None) is not None else False
        self._text_pool = ThreadPoolExecutor(workers, thread_name_prefix="bg-tokenizer")
        self._image_pool = ThreadPoolExecutor(1, thread_name_prefix="bg-image")

    def close(self) -> None:
        self._text_pool.shutdown(wait=False, cancel_futures=True)
        self._image_pool.shutdown(wait=False, cancel_futures=True)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run tokenizer work on the tokenization pool, never on the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._text_pool, functools.partial(fn, *args, **kwargs))

    def check_prompt_chars(self, chars: int) -> None:
        """Refuse (400) a prompt text too long to fit the context whatever it tokenizes to."""
        if chars > self.max_prompt_chars:
            raise bad(f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                      f"prompt is {chars} characters long, more than {self.max_model_len} tokens can hold (no "
                      f"token of this tokenizer is longer than {self.longest_token} characters); it was "
                      "refused before tokenization.", param="messages")

    async def chat_prompt(self, chat: ChatRequest) -> Prompt:
        self.check_prompt_chars(chat.text_chars)  # on the event loop: costs nothing, spares the pool
        if chat.truncate_prompt_tokens is not None and chat.truncate_prompt_tokens > self.max_model_len:
            # As vLLM answers; and the tokenizer's backend cannot even hold a limit past 2**64 (a 500).
            raise bad(f"truncate_prompt_tokens value ({chat.truncate_prompt_tokens}) is greater than "
                      f"max_model_len ({self.max_model_len}). Please, select a smaller truncation size.",
                      param="truncate_prompt_tokens")
        if chat.image_urls:
            fetched = await self._fetch_remote(chat.image_urls)
            loop = asyncio.get_running_loop()
            prompt = await loop.run_in_executor(self._image_pool, self._multimodal_prompt, chat, fetched)
        else:
            prompt = await self.run(self._text_prompt, chat)
        if len(prompt.token_ids) > self.max_model_len:
            raise bad(f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                      f"messages resulted in {len(prompt.token_ids)} tokens.", param="messages")
        return prompt

    async def _fetch_remote(self, urls: list[str]) -> dict[int, bytes]:
        # On the event loop, with aiohttp: a slow image server holds this request, not the image thread.
        if not self.allow_remote_images:
            return {}  # load_bytes refuses remote URLs with the message that says how to allow them
        fetched: dict[int, bytes] = {}
        for i, url in enumerate(urls):
            if is_remote(url):
                try:
                    fetched[i] = await fetch_remote(url, self.bounds)
                except ImageError as exc:
                    raise bad(f"image {i}: {exc}", param="messages", code="invalid_image") from None
        return fetched

    def encode_bad_words(self, words: list[str]) -> list[list[int]]:
        """vLLM (0.17–0.20) encodes `bad_words` on the event loop while the renderer's threads encode
        prompts: called from the event loop here too, on purpose, so that the reference server races where
        vLLM does (each word with and without a leading space, no special tokens)."""
        return [self.encode_text(prefix + word) for word in words for prefix in ("", " ")]

    async def completion_prompt(self, prompt: str, max_tokens: int, truncate_prompt_tokens: int | None) -> Prompt:
        """/v1/completions as vLLM tokenizes it: special tokens added, truncated at the request's limit."""
        self.check_prompt_chars(len(prompt))
        if truncate_prompt_tokens is not None and truncate_prompt_tokens > self.max_model_len:
            raise bad(f"truncate_prompt_tokens value ({truncate_prompt_tokens}) is greater than "
                      f"max_model_len ({self.max_model_len}). Please, select a smaller truncation size.",
                      param="truncate_prompt_tokens")
        room = self.max_model_len - max_tokens
        if room < 1:
            raise bad(f"max_tokens={max_tokens} cannot be greater than max_model_len={self.max_model_len}. "
                      "Please request fewer output tokens.", param="max_tokens")
        limit = truncate_prompt_tokens if truncate_prompt_tokens and truncate_prompt_tokens > 0 else room + 1
        ids = await self.run(self._encode_truncated, prompt, limit)
        if len(ids) > room:
            raise bad(f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                      f"requested {max_tokens} output tokens and your prompt contains at least {len(ids)} "
                      "input tokens. Please reduce the length of the input prompt.", param="prompt")
        return Prompt(ids)

    # -- runs on the tokenization pool ---------------------------------------------------------------

    def _encode_truncated(self, text: str, limit: int) -> list[int]:
        encoding = self.tokenizer(text, add_special_tokens=True, truncation=True, max_length=limit)
        return list(encoding["input_ids"])

    def detokenize(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids)

    def render(self, chat: ChatRequest) -> str:
        from jinja2 import TemplateError

        try:
            return self.tokenizer.apply_chat_template(
                chat.messages, tools=chat.tool_dicts, add_generation_prompt=True, tokenize=False
            )
        except (TemplateError, TypeError) as exc:  # the template met a message shape it cannot handle
            raise bad(f"The chat template cannot render these messages: {exc}", param="messages") from None
        except ValueError as exc:  # e.g. a tokenizer without a chat template
            raise bad(str(exc), param="messages") from None

    def encode_prompt(self, text: str, truncate_prompt_tokens: int | None) -> list[int]:
        """vLLM's renderer call: the settings differ per request, which is what races."""
        if truncate_prompt_tokens is None:
            encoding = self.tokenizer(text, add_special_tokens=False, truncation=False)
        else:
            limit = self.max_model_len if truncate_prompt_tokens < 0 else truncate_prompt_tokens
            encoding = self.tokenizer(text, add_special_tokens=False, truncation=True, max_length=limit)
        return list(encoding["input_ids"])

    def encode_text(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    def decode_pieces(self, token_ids: list[int]) -> list[str]:
        """The text each token adds, decoded incrementally like vLLM's detokenizer (a token that ends
        inside a multi-byte character adds "" and its text arrives with the next one)."""
        decode = self.tokenizer.decode
        pieces: list[str] = []
        prefix = read = 0
        for i in range(len(token_ids)):
            prefix_text = decode(token_ids[prefix:read], skip_special_tokens=True)
            new_text = decode(token_ids[prefix : i + 1], skip_special_tokens=True)
            if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
                pieces.append(new_text[len(prefix_text) :])
                prefix, read = read, i + 1
            else:
                pieces.append("")
        return pieces

    def _text_prompt(self, chat: ChatRequest) -> Prompt:
        text = self.render(chat)
        self.check_prompt_chars(len(text))  # the template adds tools and markup to the messages' text
        return Prompt(self.encode_prompt(text, chat.truncate_prompt_tokens))

    # -- runs on the image thread --------------------------------------------------------------------

    def _multimodal_prompt(self, chat: ChatRequest, fetched: dict[int, bytes]) -> Prompt:
        text = self.render(chat)
        self.check_prompt_chars(len(text))  # before any image is decoded
        counts = []
        for i, url in enumerate(chat.image_urls):
            try:
                data = fetched[i] if i in fetched else load_bytes(url, self.bounds, self.allow_remote_images, self.allow_remote_name)
                counts.append(patch_count(data, self.bounds))
            except ImageError as exc:
                raise bad(f"image {i}: {exc}", param="messages", code="invalid_image") from None
        segments = text.split(IMAGE_PAD)
        if len(segments) != len(counts) + 1:
            raise bad(f"the rendered prompt holds {len(segments) - 1} {IMAGE_PAD} placeholders for "
                      f"{len(counts)} images (a tokenizer whose template does not render images, or "
                      f"{IMAGE_PAD} typed in the text)", param="messages")
        # Each placeholder is one token, so the expanded text is bounded the same way.
        self.check_prompt_chars(len(text) + (len(IMAGE_PAD) * (sum(counts) - len(counts))))
        expanded = segments[0] + "".join(IMAGE_PAD * n + rest for n, rest in zip(counts, segments[1:]))
        kwargs: dict[str, Any] = {"add_special_tokens": False, "padding": self._pad_for_processor,
                                  "return_tensors": None}
        if chat.truncate_prompt_tokens is not None:
            limit = self.max_model_len if chat.truncate_prompt_tokens < 0 else chat.truncate_prompt_tokens
            kwargs.update(truncation=True, max_length=limit)
        # A processor tokenizes a batch of texts (here, one): `self.tokenizer(text, **text_kwargs)`.
        encoding = self.tokenizer([expanded], **kwargs)
        return Prompt(list(encoding["input_ids"][0]))


def _longest_token(tokenizer: Any) -> int:
    """The most characters one token of `tokenizer` stands for (an upper bound).

    A vocabulary entry is at least as long as the text its token decodes to: byte-level BPE spells each
    byte as one character, SentencePiece's "▁" is one space, WordPiece adds "##", byte fallback "<0x41>".
    """
    try:
        return max(1, max(map(len, tokenizer.get_vocab()), default=1))
    except Exception:  # a tokenizer without a readable vocabulary: assume generously long tokens
        return 64
