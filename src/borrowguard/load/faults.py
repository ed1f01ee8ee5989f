"""Whose fault is a failed request: ours (the workload does not fit this server), the tokenizer race,
or the server's. The verdict counts only the last two against the server.

vLLM's own wording (0.17 → 0.21) decides most cases: a prompt longer than the context window, a model
without vision, a server started without a tool parser, a field it does not know. Other OpenAI-compatible
servers use close variants; anything unrecognised stays the server's fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from borrowguard._compat import StrEnum
from borrowguard.knowledge import Kind, load


class Fault(StrEnum):
    WORKLOAD = "workload"  # our request does not fit this server: reported apart, never against it
    TOKENIZER = "tokenizer"  # the tokenizer race: the body says so
    SERVER = "server"  # anything else on the server's side: 5xx, resets, timeouts, unexplained 4xx


class MismatchKind(StrEnum):
    """Kinds of workload mismatch: what we sent that the server cannot take (verify.wording.FIXES says
    what to change)."""

    TOO_LONG = "too-long"
    NO_VISION = "no-vision"
    TOO_MANY_IMAGES = "too-many-images"
    NO_TOOLS = "no-tools"
    TOOL_CALL_CUT = "tool-call-cut"
    UNKNOWN_FIELD = "unknown-field"
    NO_ENDPOINT = "no-endpoint"


TOKENIZER_PATTERN = load().answer_pattern(Kind.TOKENIZER_RACE) or re.compile(r"(?!)")
"""The texts by which the tokenizer race shows in an answer's message: the knowledge base's `answers` of
its tokenizer-race problems ("Already borrowed", "Failed to acquire tokenizer", "Truncation error"...)."""

_MISMATCH_PATTERNS: tuple[tuple[MismatchKind, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            MismatchKind.TOO_LONG,
            # 0.18+: "This model's maximum context length is X tokens. However, you requested M output tokens and
            # your prompt contains [at least] N input tokens"; 0.17: "You passed N input tokens ... the model's
            # context length is only X tokens"; both also have a characters pre-check; and "max_tokens=M
            # cannot be greater than max_model_len=...".
            r"maximum context length|context length is only|longer than the maximum model length"
            r"|max_tokens.{0,40}(too large|cannot be greater than max_model_len)"
            r"|reduce the length of the (input |messages|prompt)|exceeds the model's max",
        ),
        (MismatchKind.TOO_MANY_IMAGES, r"at most \d+ image"),
        (
            MismatchKind.NO_VISION,
            r"not a multimodal model|does not support (multimodal|image|vision)|image input is not supported"
            r"|unsupported content part type|unknown part type.{0,20}image",
        ),
        (
            MismatchKind.NO_TOOLS,
            r"tool choice requires --enable-auto-tool-choice|requires --tool-call-parser|--tool-call-parser to be set"
            r"|tool_choice.{0,40}not supported"
            r"|tools? (are|is) not supported",
        ),
        (MismatchKind.TOOL_CALL_CUT, r"(tool call|tool_call).{0,60}(max_tokens|length|truncat|incomplete)"),
        (
            MismatchKind.UNKNOWN_FIELD,
            r"extra (inputs|fields) (are )?not permitted|unexpected keyword|unrecognized",
        ),
    )
)

_LENGTH_PATTERNS = (
    # "This model's maximum context length is 2048 tokens. However, your request has 2100 input tokens"
    # "... your prompt contains at least 2033 input tokens"
    re.compile(
        r"maximum context length is (\d+) tokens.*?(?:has|contains(?: at least)?) (\d+) input tokens",
        re.IGNORECASE | re.DOTALL,
    ),
    # 0.17: "You passed 2100 input tokens and requested 16 output tokens. However, the model's context length
    # is only 2048 tokens" (its characters pre-check says "input characters": no token count to learn there)
    re.compile(r"You passed (\d+) input tokens.*?context length is only (\d+) tokens", re.IGNORECASE | re.DOTALL),
    # "The prompt (total length 2100) is too long to fit into the model (context length 2048)"
    re.compile(r"total length (\d+)\).*?context length (\d+)", re.IGNORECASE | re.DOTALL),
    # "Prompt length of 2100 is longer than the maximum model length of 2048."
    re.compile(r"length of (\d+) is longer than the maximum model length of (\d+)", re.IGNORECASE),
)


@dataclass(frozen=True)
class Blame:
    fault: Fault
    mismatch: MismatchKind | None = None


# vLLM 0.17 parses a forced tool call's generated arguments and answers 400 with the JSON parser's error when
# `max_tokens` cut them (0.19+ answer 200 with `tool_calls: []`): the prompt was tokenized and generated.
_CUT_TOOL_CALL = re.compile(r"Invalid JSON: EOF while parsing", re.IGNORECASE)


# A 4xx whose message names a Python exception of the server's own code is a server bug, not our request.
_SERVER_EXCEPTION = re.compile(
    r"\b(TypeError|AttributeError|KeyError|IndexError|NameError|AssertionError|UnboundLocalError"
    r"|ZeroDivisionError|NotImplementedError|RecursionError)\b"
)
MAX_OUTPUT_SENT = 512  # no request of ours asks for more output tokens than this
MIN_SCALE_SENT = 0.02  # load.fit.MIN_SCALE: the smallest our prompts get


def blame(status: int | None, message: str | None, scenario: str | None = None, *, scale: float = 1.0,
          served: bool = False) -> Blame:
    """Classify one failed answer: an HTTP status and the server's error message; `scenario` (which of ours
    the request was), `scale` (the ContextFit scale it was built at) and `served` (the preflight saw its
    endpoint answer) decide where a class is only a claim. A workload class holds only when the server's
    own numbers bear it out: a 404 on an endpoint that answered the preflight, a "too long" whose numbers
    say the prompt fits or that comes for our smallest prompts, a 4xx naming an exception of the server's
    code — all the server's."""
    text = message or ""
    if TOKENIZER_PATTERN.search(text):
        return Blame(Fault.TOKENIZER)
    if scenario == "tools" and status == 400 and _CUT_TOOL_CALL.search(text):
        return Blame(Fault.WORKLOAD, MismatchKind.TOOL_CALL_CUT)
    if status is None or not 400 <= status < 500 or _SERVER_EXCEPTION.search(text):
        return Blame(Fault.SERVER)
    if status == 404:
        return Blame(Fault.SERVER) if served else Blame(Fault.WORKLOAD, MismatchKind.NO_ENDPOINT)
    for kind, pattern in _MISMATCH_PATTERNS:
        if pattern.search(text):
            if kind is MismatchKind.TOO_LONG and not _too_long_holds(text, scale):
                return Blame(Fault.SERVER)
            return Blame(Fault.WORKLOAD, kind)
    return Blame(Fault.SERVER)


def _too_long_holds(message: str, scale: float) -> bool:
    """A context-length refusal is ours only if its numbers do not contradict it and shrinking can help."""
    if scale <= MIN_SCALE_SENT * 1.001:
        return False  # refused at our smallest prompts: shrinking cannot fix it
    length, tokens = context_numbers(message)
    return not (length is not None and tokens is not None and tokens + MAX_OUTPUT_SENT < length)


def context_numbers(message: str) -> tuple[int | None, int | None]:
    """(max_model_len, prompt tokens) from a context-length error message, where it says them."""
    for i, pattern in enumerate(_LENGTH_PATTERNS):
        match = pattern.search(message)
        if match:
            a, b = int(match.group(1)), int(match.group(2))
            return (a, b) if i == 0 else (b, a)
    # the characters pre-check, or 0.32+: the context length alone
    match = re.search(r"(?:maximum context length is|context length is only) (\d+) tokens", message, re.IGNORECASE)
    return (int(match.group(1)), None) if match else (None, None)
