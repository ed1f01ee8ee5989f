"""Tracebacks in shapes other than Python's own, read as Python's.

Servers and their tools print tracebacks in several ways besides `Traceback (most recent call last):`:

* `rich` boxed tracebacks: a box titled "Traceback (most recent call last)", frames as `│ PATH:LINE in
  FUNCTION │`, source lines as `│   493 │ code │` with the failing one marked `❱`;
* error trackers' JSON stack traces (Sentry-style frames): `"filename": "transformers/tokenization_utils_base.py"`,
  `"function": "__call__"`, `"context_line": "..."`, the exception's `"value": "..."`, pretty-printed;
* tracebacks inside one line: a JSON log record (loguru, structlog, any `json.dumps` of a record) whose
  `\\n` escapes hold the whole traceback, or a paste that lost its newlines and glued the frames together.

`python_line` rewrites one line of the first two shapes into the Python line it stands for (normalize
applies it, so every reader sees the same); `unglue` splits a line of the third shape into the Python lines
it holds (the scanner reads them in order, as one record).
"""

from __future__ import annotations

import json
import re

_RICH_FRAME = re.compile(r"(?P<path>\S{1,1024}?):(?P<line>\d{1,7}) in (?P<func>[\w.<>]{1,200})")
_RICH_PATH = re.compile(r"\S{0,1024}\.py(?::\d{0,7})?")
_RICH_CODE = re.compile(r"(?:❱ {0,3})?\d{1,7} {0,3}│(?P<code>.{0,4096})")
_JSON_KEY = re.compile(r'"(?P<key>filename|abs_path|function|context_line|value)": ?"(?P<text>(?:[^"\\]|\\.){0,4096})"')
_GLUED_FRAME = re.compile(r' {0,8}(?=File "[^"\n]{1,1024}", line \d{1,7})')
_LAST_EXCEPTION = re.compile(r"\s(?=[A-Za-z_][\w.]{0,100}(?:Error|Exception|Exit|Interrupt|Warning)(?::\s|$))")
HEADER = "Traceback (most recent call last):"
MAX_PARTS = 400
"""A line is split into at most this many (a real traceback has a few dozen frames)."""


def python_line(message: str) -> str:
    """The Python traceback line a rich box line or a JSON frame line stands for; other lines unchanged."""
    first = message[:1]
    if first in ("│", "╭", "╰"):
        return _rich(message)
    if first in (" ", "\t") and '": ' in message:
        return _json_frame(message)
    return message


def _rich(message: str) -> str:
    if message[:1] == "╭":
        return HEADER if "Traceback" in message else message
    if message[:1] == "╰":
        return "    ·"  # the box's bottom: still inside the traceback, whose exception line follows
    inner = message[1:].rstrip().removesuffix("│").strip()
    m = _RICH_FRAME.fullmatch(inner)
    if m is not None:
        return f'  File "{m["path"]}", line {m["line"]}, in {m["func"]}'
    if _RICH_PATH.fullmatch(inner) and "/" in inner:  # a long path wrapped: the function is on the next line
        path, _, line = inner.partition(".py:")
        return f'  File "{path}.py", line {line or 0}, in ?' if line or inner.endswith(".py") else "    " + inner
    m = _RICH_CODE.match(inner)
    if m is not None:
        code = m["code"].lstrip("│ ").rstrip()
        return "    " + (code or "·")
    return "    " + (inner.strip("│ ") or "·")


def _json_frame(message: str) -> str:
    m = _JSON_KEY.match(message.lstrip())
    if m is None:
        return message
    text = _unescape(m["text"])
    key = m["key"]
    if key in ("filename", "abs_path"):
        return f'  File "{text}", line 0, in ?'
    if key == "function":
        return f'  File "?", line 0, in {text}'
    if key == "context_line":
        return "    " + (text.strip() or "·")
    return text.strip() or message  # the exception's value: the line that ends its traceback


def _unescape(text: str) -> str:
    try:
        return str(json.loads(f'"{text}"'))
    except ValueError:
        return text.replace('\\"', '"')


def unglue(message: str) -> list[str] | None:
    """The Python lines of a traceback held in one line (JSON `\\n` escapes, or frames glued together),
    the text before it first; None for an ordinary line."""
    at = message.find("Traceback (most recent call last)")
    if at == -1:
        if '\\n  File \\"' not in message and '\\n  File "' not in message:
            return None
        at = message.find("\\n")
    if "\\n" in message[at:]:
        parts = message[at:].split("\\n")
        parts = [p.replace('\\"', '"').replace("\\\\", "\\").rstrip('"}], ') if i == len(parts) - 1 else
                 p.replace('\\"', '"').replace("\\\\", "\\") for i, p in enumerate(parts)]
    elif 'File "' in message[at:]:
        body = message[at:]
        parts = _GLUED_FRAME.split(body)
        parts = [p.strip() for p in (*parts[:-1], *_last_split(parts[-1]))]
    else:
        return None
    before = message[:at].rstrip()
    lines = ([before] if before.strip() else []) + [p for p in parts if p.strip()]
    return lines[:MAX_PARTS] if len(lines) > 1 else None


def _last_split(last: str) -> list[str]:
    # The exception is the last "SomethingError: ..." after the last frame: split there once, from the right.
    matches = list(_LAST_EXCEPTION.finditer(last))
    if not matches:
        return [last]
    cut = matches[-1].end()
    return [last[:cut], last[cut:]]
