"""Parsing of the load options users type (`30s`, `256x256,720x1280`, `text=1,image=1`).

Every parser raises UserInputError with a message that says what was expected, so the CLI can answer
with one line and exit 2 instead of a traceback.
"""

from __future__ import annotations

import math
import re

from borrowguard.errors import UserInputError

SCENARIOS = ("text", "image", "tools", "tokenize", "embed", "rerank", "score", "pooling", "classify")
CHAT_MIX = "text=2,image=1,tools=1,tokenize=1"
# The pooling scenarios (load.pooling) are in the default mix too: the preflight keeps those the server
# serves, so an embedding or reranking server gets its own endpoints raced and a chat server loses nothing.
POOLING_MIX = "embed=2,rerank=1,score=1,pooling=1,classify=1"
DEFAULT_MIX = f"{CHAT_MIX},{POOLING_MIX}"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_MAX_IMAGE_SIDE = 8192  # a bigger synthetic image only measures the client's PNG encoder


def parse_duration(text: str, what: str = "duration", allow_zero: bool = False) -> float:
    """`30s`, `5m`, `1h`, `250ms` or a bare number of seconds -> seconds (> 0 unless `allow_zero`)."""
    match = _DURATION.match(text or "")
    if not match:
        raise UserInputError(f"{what}: expected a duration like 30s, 5m or 1h, got {text!r}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()]
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise UserInputError(f"{what}: must be more than zero, got {text!r}")
    return seconds


def parse_image_sizes(text: str) -> list[tuple[int, int]]:
    """`256x256,720x1280` -> [(256, 256), (720, 1280)] as (width, height)."""
    sizes: list[tuple[int, int]] = []
    for part in _split(text):
        match = re.fullmatch(r"(\d+)[xX](\d+)", part)
        if not match:
            raise UserInputError(f"--image-sizes: expected WIDTHxHEIGHT[,WIDTHxHEIGHT...], got {part!r}")
        width, height = int(match.group(1)), int(match.group(2))
        if not (16 <= width <= _MAX_IMAGE_SIDE and 16 <= height <= _MAX_IMAGE_SIDE):
            raise UserInputError(
                f"--image-sizes: each side must be 16..{_MAX_IMAGE_SIDE} pixels, got {part!r}"
            )
        sizes.append((width, height))
    if not sizes:
        raise UserInputError("--image-sizes: give at least one size, e.g. 256x256")
    return sizes


def parse_mix(text: str) -> dict[str, float]:
    """`text=1,image=2,tools=1` -> weights; a scenario left out or set to 0 is not sent."""
    weights: dict[str, float] = {}
    for part in _split(text):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if name not in SCENARIOS:
            raise UserInputError(f"--mix: unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
        try:
            weight = float(value) if sep else 1.0
        except ValueError:
            raise UserInputError(f"--mix: weight of {name!r} must be a number, got {value!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise UserInputError(f"--mix: weight of {name!r} must be a finite number >= 0, got {value!r}")
        weights[name] = weight
    weights = {name: w for name, w in weights.items() if w > 0}
    if not weights:
        raise UserInputError(
            f"--mix: at least one scenario needs a weight above 0, e.g. {DEFAULT_MIX}"
        )
    return weights


def parse_levels(text: str) -> list[int]:
    """`8,16,32` -> [8, 16, 32] (each >= 1, increasing order kept as given)."""
    levels: list[int] = []
    for part in _split(text):
        if not part.isdigit() or int(part) < 1:
            raise UserInputError(f"--sweep: expected concurrency levels like 8,16,32, got {part!r}")
        levels.append(int(part))
    if not levels:
        raise UserInputError("--sweep: give at least one concurrency level, e.g. 8,16,32")
    return levels


def _split(text: str) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]
