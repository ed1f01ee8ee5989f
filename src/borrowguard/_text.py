"""Text that came from elsewhere (a server's error body, a log line, a model name), made safe to print.

A terminal obeys escape sequences: a hostile or broken server must not retitle the window, clear the
screen or hide lines. Everything printed from outside goes through `printable`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# ESC-introduced sequences (CSI, OSC up to BEL or ST, two-character escapes), then the remaining C0 and C1
# controls except tab and newline.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


MASK = "***"


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` (from outside: a body, a header, a log line, a URL) with each secret replaced by `***`: mask
    first, cut after (`clip`), or the start of a key survives the cut where no later mask can find it."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (mask it first)."""
    return text[:limit]


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """`value` (a JSON-like document) with every occurrence of each secret replaced by `***`."""
    secrets = [s for s in secrets if s]
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value
