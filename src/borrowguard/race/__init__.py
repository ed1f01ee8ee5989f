"""The race, made and measured: concurrent tokenizer calls checked against a serial reference.

One piece of code serves the guard's tests, `borrowguard repro` and `borrowguard run`'s tests:

    calls = make_calls(tok, random.Random(0), 200)       # race.calls: calls whose settings collide
    expected = reference(tok, calls)                     # race.compare: serial, one thread
    result = hammer(tok, calls, expected, threads=8, seconds=2)   # race.hammer
    result.exceptions, result.wrong_outputs              # {"Already borrowed": 812}, {"pair": 31, ...}

`borrowguard.race.repro` runs it on the installed stack and names the outcome (crash, silent corruption,
safe). Nothing here imports transformers or tokenizers except `make_processor` (race.processor).
"""

from __future__ import annotations

from typing import Any

from borrowguard.race.calls import ALL_KINDS, IMAGE_TOKEN, TOOLS, Call, make_calls
from borrowguard.race.compare import Mismatch, Raised, exception_kind, normalise, reference
from borrowguard.race.hammer import HammerResult, hammer

__all__ = [
    "ALL_KINDS",
    "IMAGE_TOKEN",
    "TOOLS",
    "Call",
    "HammerResult",
    "Mismatch",
    "Raised",
    "exception_kind",
    "hammer",
    "make_calls",
    "make_processor",
    "normalise",
    "reference",
]


def make_processor(tokenizer: Any) -> Any:
    """A Qwen2-VL-style processor around `tokenizer` (imports transformers; see race.processor)."""
    from borrowguard.race.processor import make_processor as make

    return make(tokenizer)
