"""The STUB engine: no model, deterministic output, real token counts.

It answers every chat with the same reply text (cut at `max_tokens`), or with a tool call whose
arguments satisfy the tool's schema when `tool_choice` is "required" or names a function. The reply is
tokenized and decoded by the real tokenizer on the tokenization pool, so detokenization is part of the
concurrent tokenizer traffic, as in a real server. `token_delay_ms` imitates decoding time per token.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from borrowguard.server.frontend import FrontEnd
from borrowguard.server.protocol import ChatRequest, Tool, bad
from borrowguard.server.tools import ToolArgumentsError, example_arguments

NAME = "stub"
REPLY = (
    "This reply comes from the borrowguard stub engine. The front end that handled your request is real: "
    "chat template, image processing and tokenizer, shared between threads as in a production server. "
    "Only the model is missing."
)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the OpenAI API sends it
    argument_pieces: list[str] = field(default_factory=list)  # streamed one token at a time


@dataclass
class Completion:
    pieces: list[str]  # text added by each generated token
    completion_tokens: int
    finish_reason: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.pieces)


class StubEngine:
    def __init__(self, frontend: FrontEnd, token_delay_ms: float = 0.0) -> None:
        if token_delay_ms < 0:
            raise ValueError("token_delay_ms must be >= 0")
        self.frontend = frontend
        self.delay_s = token_delay_ms / 1000.0
        self.reply_ids = frontend.encode_text(REPLY)

    async def complete(self, chat: ChatRequest) -> Completion:
        tool = self._forced_tool(chat)
        if tool is not None:
            return await self.frontend.run(self._tool_completion, tool)
        ids = self.reply_ids[: chat.max_tokens] if chat.max_tokens else self.reply_ids
        pieces = await self.frontend.run(self.frontend.decode_pieces, ids)
        finish = "length" if len(ids) < len(self.reply_ids) else "stop"
        return Completion(pieces, len(ids), finish)

    async def pace(self, tokens: int) -> None:
        """Time the engine would spend generating `tokens` tokens."""
        if self.delay_s and tokens:
            await asyncio.sleep(self.delay_s * tokens)

    async def paced(self, completion: Completion) -> AsyncIterator[str]:
        """The completion's text pieces (or argument pieces of a tool call) at the engine's pace."""
        if completion.tool_calls:
            call = completion.tool_calls[0]
            # Tokens of the <tool_call> wrapper come before the arguments.
            await self.pace(completion.completion_tokens - len(call.argument_pieces))
            pieces = call.argument_pieces
        else:
            pieces = completion.pieces
        for piece in pieces:
            await self.pace(1)
            yield piece

    @staticmethod
    def _forced_tool(chat: ChatRequest) -> Tool | None:
        # "auto" and "none" get the text reply: the stub makes no decisions. "required" takes the first tool.
        if chat.tool_choice.mode == "required":
            return chat.tools[0]
        if chat.tool_choice.mode == "named":
            return next(tool for tool in chat.tools if tool.name == chat.tool_choice.name)
        return None

    def _tool_completion(self, tool: Tool) -> Completion:
        # On the tokenization pool: the model would emit this text; count and stream it with real tokens.
        try:
            arguments = json.dumps(example_arguments(tool.parameters), ensure_ascii=False)
        except ToolArgumentsError as exc:  # too large, or a constraint the stub does not model
            raise bad(f"tool {tool.name!r}: {exc}", param="tools", code="unsupported_tool_schema") from None
        emitted = f'<tool_call>\n{{"name": {json.dumps(tool.name)}, "arguments": {arguments}}}\n</tool_call>'
        total = len(self.frontend.encode_text(emitted))
        argument_ids = self.frontend.encode_text(arguments)
        argument_pieces = self.frontend.decode_pieces(argument_ids)
        if "".join(argument_pieces) != arguments:
            # A tokenizer whose decode does not round-trip (WordPiece lowercases and re-spaces): stream the
            # exact JSON in as many slices as it has tokens, so the streamed arguments still parse.
            argument_pieces = _slices(arguments, len(argument_ids))
        call = ToolCall(f"chatcmpl-tool-{uuid.uuid4().hex}", tool.name, arguments, argument_pieces)
        return Completion([], total, "tool_calls", [call])


def _slices(text: str, count: int) -> list[str]:
    count = max(1, min(count, len(text)))
    bounds = [len(text) * i // count for i in range(count + 1)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]
