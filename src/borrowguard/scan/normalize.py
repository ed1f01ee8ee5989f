"""Turn one raw log line into (message, timestamp, level, process), whatever wrapped it.

Real logs arrive wrapped in layers, outermost first: ANSI colour codes (raw ESC, caret notation `^[[31m`
from `cat -v`, the text `ESC[0;36m` some viewers store, or a bare `[36m` whose ESC a paste lost), a
docker-compose `name  | `, Buildkite `  | ` or kubectl `[pod/name/container] ` prefix, torchrun's
`[rank0]: ` labels, a docker/kubectl ISO timestamp, vLLM process prefixes `(EngineCore_DP0 pid=5678) `
(nested for Ray workers), and a log header:
vLLM V1 `INFO 07-07 20:12:44 [serving.py:311] `, V0 `INFO 07-07 20:12:44 metrics.py:295] `, uvicorn
`INFO:     `, Python logging `2025-07-07 20:12:44,123 - name - ERROR - ` or `ERROR:name:`. Signatures and
the traceback tracker see only the message, with its indentation kept (traceback frames are indented).

Every regex here is bounded or anchored so that a hostile line cannot make it backtrack for long.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, NamedTuple

from borrowguard.scan.shapes import python_line

MAX_LINE = 64 * 1024
"""Longer lines keep their first and last HEAD bytes: headers and exception messages sit at the ends; the
middle of a huge line is a prompt or a base64 image, never a failure signature."""
HEAD = MAX_LINE // 2
ELLIPSIS = " … "
ELLIPSIS_BYTES = ELLIPSIS.encode()

_ANSI_BODY = (
    r"(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]"  # CSI: colours, cursor moves
    r"|\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\|\^G)"  # OSC: titles, hyperlinks
    r"|[()][0-9A-Za-z]|[@-Z\\-_])"  # charset selection, two-byte escapes
)
_RAW_SOURCE = r"(?:\x1b|\^\[)" + _ANSI_BODY
ANSI = re.compile(_RAW_SOURCE)
ANSI_BYTES = re.compile(_RAW_SOURCE.encode())
# Colour codes as text: "ESC[0;36m" (some viewers store it so), or "[36m" whose ESC a paste lost (the
# resets, "[0m", give such a line away). Removed per line, after the raw codes.
ANSI_TEXT = re.compile(r"ESC\[[0-?]{0,32}[ -/]{0,8}[@-~]|(?<![\w\]])\[[0-9]{1,3}(?:;[0-9]{1,3}){0,4}m")

_CONTAINER = re.compile(
    r"(?:\[pod/(?P<pod>[^\s/\]]{1,253})/(?P<ctr>[^\s\]]{1,253})\]"  # kubectl logs --prefix
    r"|(?P<svc>[A-Za-z0-9][\w.-]{0,127}) {1,64}\|)(?: |$)"  # docker compose logs
)
_PIPE = re.compile(r" {0,8}\|(?: |$)")  # Buildkite and other nameless "  | " prefixes
_RANK = re.compile(r"\[(?P<label>[\w.:-]{1,40})\]: ")  # torchrun "[rank0]: ", launcher "[vllm]: "
_ISO = re.compile(
    r"\[?(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)(?:\]| - | |$)"
)
_PROCESS = re.compile(
    r"\((?P<proc>(?:[A-Za-z_][\w.-]{0,63}[ ,]{1,2})?[\w.-]{1,32}=[^()\s,]{1,128}"
    r"(?:[ ,]{1,2}[\w.-]{1,32}=[^()\s,]{1,128}){0,7})\)(?: |$)"
)
_LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
_VLLM = re.compile(
    rf"(?P<level>{_LEVELS}) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{{1,6}})?) "
    r"\[?[^\]\s]{1,256}:\d{1,7}\[?\](?: |$)"  # "[core.py:720[]": GitHub's markdown ate a bracket
)
_UVICORN = re.compile(rf"(?P<level>{_LEVELS}):(?: {{1,16}}|[\w.]{{0,128}}:)")
_LEVEL_AFTER_TS = re.compile(rf"(?:[\w.\[\]-]{{1,64}} - )?(?P<level>{_LEVELS})(?: - |: | )")


class Line(NamedTuple):
    message: str
    """The text after every prefix and header; indentation kept."""
    timestamp: str | None
    level: str | None
    process: str | None
    """Container and vLLM process labels joined by " > ", e.g. "vllm-1 > EngineCore_DP0 pid=5678"."""


def decode(raw: str | bytes) -> str:
    """Text of one line: bytes as UTF-8 with invalid bytes replaced, capped, no line terminator."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        if len(raw) > MAX_LINE:
            raw = raw[:HEAD] + ELLIPSIS_BYTES + raw[-HEAD:]
        text = raw.decode("utf-8", "replace")
    else:
        text = raw
        if len(text) > MAX_LINE:
            text = text[:HEAD] + ELLIPSIS + text[-HEAD:]
    text = text.rstrip("\r\n")
    if "\r" in text:
        # Progress bars redraw with CR: what the terminal finally showed is the last non-empty segment
        # (colour codes alone show nothing, so they are removed first, as the bulk reader removes them).
        segments = [s for s in strip_ansi(text).split("\r") if s.strip()]
        text = segments[-1] if segments else ""
    return text


def strip_ansi(text: str) -> str:
    if "\x1b" in text or "^[" in text:
        text = without_raw_codes(text)
    if "ESC[" in text or "[0m" in text:
        text = ANSI_TEXT.sub("", text)
    return text


def without_raw_codes(data: AnyStr) -> AnyStr:
    """Raw colour codes (ESC or caret notation) removed, until none is left: removing one can join the
    pieces of another (`ESC ESC[0m [31m`), and the bulk reader, which removes them from whole blocks, must
    end where the per-line reader ends."""
    raw = isinstance(data, bytes)
    pattern: Any = ANSI_BYTES if raw else ANSI
    esc, caret = (b"\x1b", b"^[") if raw else ("\x1b", "^[")
    for _ in range(8):  # bounded: each pass shortens the text
        cleaned = pattern.sub(data[:0], data)
        if cleaned == data or (esc not in cleaned and caret not in cleaned):
            return cleaned  # type: ignore[no-any-return]
        data = cleaned
    return data


def normalize(raw: str | bytes) -> Line:
    text = strip_ansi(decode(raw))
    labels: list[str] = []
    timestamp: str | None = None
    level: str | None = None

    m = _CONTAINER.match(text)
    if m:
        labels.append(f"{m['pod']}/{m['ctr']}" if m["pod"] else m["svc"])
        text = text[m.end() :]
    elif text[:1] in (" ", "|"):
        m = _PIPE.match(text)
        if m:
            text = text[m.end() :]
    for _ in range(2):
        if text[:1] != "[":
            break
        m = _RANK.match(text)
        if not m:
            break
        labels.append(m["label"])
        text = text[m.end() :]
    if text[:1].isdigit() or text[:1] == "[":
        m = _ISO.match(text)
        if m:
            timestamp = m["ts"]
            text = text[m.end() :]
    if text[:1] == " " and text.lstrip(" ")[:1] == "(":
        stripped = text.lstrip(" ")  # a colour code whose ESC was lost leaves a blank before the prefix
        text = stripped if _PROCESS.match(stripped) else text
    for _ in range(4):  # Ray workers nest: (EngineCore pid=1) (RayWorkerProc pid=2, ip=10.0.0.5)
        if text[:1] != "(":
            break
        m = _PROCESS.match(text)
        if not m:
            break
        labels.append(m["proc"])
        text = text[m.end() :]
    m = None
    if text[:1].isupper():
        m = _VLLM.match(text)
        if m:
            level, timestamp = m["level"], m["ts"]
        else:
            m = _UVICORN.match(text)
            if m:
                level = m["level"]
    if m is None and timestamp is not None:
        # Python logging after an ISO/asctime stamp: "- name - ERROR - msg", "ERROR msg", "name: ERROR: ..."
        m = _LEVEL_AFTER_TS.match(text)
        if m:
            level = m["level"]
    if m is not None:
        text = text[m.end() :]
    if level == "WARN":
        level = "WARNING"
    # rich boxes and JSON stack frames read as the Python traceback lines they stand for (scan.shapes)
    return Line(python_line(text), timestamp, level, " > ".join(labels) if labels else None)
