"""Click parameter types for the values users type (`30s`, `256x256,720x1280`, `text=1,image=1`, `8,16,32`).

Each type turns the text into the library's value (seconds, sizes, weights, levels) or raises
UserInputError naming the option and what was expected, so the user gets one line and exit 2 instead of
click's usage block or a traceback. The library never sees the text, nor names a flag.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

from borrowguard.errors import UserInputError
from borrowguard.load.scenarios import SCENARIOS

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_MAX_IMAGE_SIDE = 8192  # a bigger synthetic image only measures the client's PNG encoder


def _flag(param: click.Parameter | None, fallback: str) -> str:
    opts = [o for o in (param.opts if param is not None else []) if o.startswith("--")]
    return opts[0] if opts else fallback


class _Text(click.ParamType):
    """A value typed as text; a value that is already parsed (a default from VerifyConfig) passes as is."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        return self.parse(value, _flag(param, self.name))

    def parse(self, text: str, flag: str) -> Any:
        raise NotImplementedError


class Duration(_Text):
    """`30s`, `5m`, `1h`, `250ms` or a bare number of seconds -> seconds (> 0 unless `allow_zero`)."""

    name = "duration"

    def __init__(self, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def parse(self, text: str, flag: str) -> float:
        match = _DURATION.match(text or "")
        if not match:
            raise UserInputError(f"{flag}: expected a duration like 30s, 5m or 1h, got {text!r}")
        seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()]
        if seconds < 0 or (seconds == 0 and not self.allow_zero):
            raise UserInputError(f"{flag}: must be more than zero, got {text!r}")
        return seconds


class ImageSizes(_Text):
    """`256x256,720x1280` -> ((256, 256), (720, 1280)) as (width, height)."""

    name = "sizes"

    def parse(self, text: str, flag: str) -> tuple[tuple[int, int], ...]:
        sizes: list[tuple[int, int]] = []
        for part in _split(text):
            match = re.fullmatch(r"(\d+)[xX](\d+)", part)
            if not match:
                raise UserInputError(f"{flag}: expected WIDTHxHEIGHT[,WIDTHxHEIGHT...], got {part!r}")
            width, height = int(match.group(1)), int(match.group(2))
            if not (16 <= width <= _MAX_IMAGE_SIDE and 16 <= height <= _MAX_IMAGE_SIDE):
                raise UserInputError(f"{flag}: each side must be 16..{_MAX_IMAGE_SIDE} pixels, got {part!r}")
            sizes.append((width, height))
        if not sizes:
            raise UserInputError(f"{flag}: give at least one size, e.g. 256x256")
        return tuple(sizes)


class Mix(_Text):
    """`text=1,image=2,tools=1` -> weights; a scenario left out or set to 0 is not sent."""

    name = "mix"

    def parse(self, text: str, flag: str) -> dict[str, float]:
        weights: dict[str, float] = {}
        for part in _split(text):
            name, sep, value = part.partition("=")
            name = name.strip().lower()
            if name not in SCENARIOS:
                raise UserInputError(f"{flag}: unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
            try:
                weight = float(value) if sep else 1.0
            except ValueError:
                raise UserInputError(f"{flag}: weight of {name!r} must be a number, got {value!r}") from None
            if not math.isfinite(weight) or weight < 0:
                raise UserInputError(f"{flag}: weight of {name!r} must be a finite number >= 0, got {value!r}")
            weights[name] = weight
        weights = {name: w for name, w in weights.items() if w > 0}
        if not weights:
            raise UserInputError(f"{flag}: at least one scenario needs a weight above 0, e.g. text=1,image=1")
        return weights


class Levels(_Text):
    """`8,16,32` -> [8, 16, 32] (each >= 1, in the order given)."""

    name = "levels"

    def parse(self, text: str, flag: str) -> list[int]:
        levels: list[int] = []
        for part in _split(text):
            if not part.isdigit() or int(part) < 1:
                raise UserInputError(f"{flag}: expected concurrency levels like 8,16,32, got {part!r}")
            levels.append(int(part))
        if not levels:
            raise UserInputError(f"{flag}: give at least one concurrency level, e.g. 8,16,32")
        return levels


def show_duration(seconds: float) -> str:
    """A default in seconds, the way users type it (`30s`)."""
    return f"{seconds:g}s"


def show_mix(mix: dict[str, float]) -> str:
    return ",".join(f"{name}={weight:g}" for name, weight in mix.items())


def show_sizes(sizes: tuple[tuple[int, int], ...]) -> str:
    return ",".join(f"{w}x{h}" for w, h in sizes)


def _split(text: str) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]
