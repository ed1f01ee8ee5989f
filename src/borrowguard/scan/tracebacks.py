"""Follow Python tracebacks line by line, one per process, in bounded memory.

A traceback is a window of lines: it opens at `Traceback (most recent call last):` or at a frame line (posted
excerpts often start mid-traceback), continues over indented lines (frames, code, carets) and ends at the
first line of the same process that is not indented: the exception line when it looks like one
(`module.Name: message`), otherwise the excerpt was cut before the exception.

Pastes also lose the indentation (`File "x.py", line 3, in f` at the start of the line, the code on the
next line or glued after the function name): a window opened by such a frame is *flat*, and an unindented
line in it that carries no log header and does not look like an exception line is read as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

MAX_WINDOW_LINES = 2000
"""A traceback longer than this is closed as if cut: real ones are a few hundred lines at most."""
MAX_WINDOWS = 64
"""Open tracebacks per source (one per process); the oldest is closed as cut beyond this."""

BARE_HEADER = "Traceback (most recent call last):"
"""A traceback's first line, alone."""

_EXCEPTION = re.compile(r"[A-Za-z_][\w.]{0,200}(?::|$)")


class Kind(Enum):
    HEADER = "header"
    FRAME = "frame"
    INDENTED = "indented"
    OTHER = "other"


_FLAT_FRAME = re.compile(r'File "[^"\n]{1,1024}", line \d{1,7}')


def classify(message: str) -> Kind:
    if message[:1] == "F" and _FLAT_FRAME.match(message):
        return Kind.FRAME  # indentation lost in the paste
    if message[:1] in (" ", "\t"):
        stripped = message.lstrip()
        if stripped.startswith('File "'):
            return Kind.FRAME
        if stripped.startswith("Traceback (most recent call last)"):
            return Kind.HEADER  # exception groups indent nested tracebacks
        return Kind.INDENTED if stripped else Kind.OTHER
    if message.startswith("Traceback (most recent call last)"):
        return Kind.HEADER
    return Kind.OTHER


def exception_line(message: str) -> bool:
    return _EXCEPTION.match(message) is not None


def indentation(message: str) -> int:
    return len(message) - len(message.lstrip(" \t"))


_TOKENIZER_FRAME = re.compile(r"tokenization_utils|tokenizers[/\\]|in (?:_?batch_)?encode(?:_plus)?\b")
"""Frames of a fast tokenizer call (transformers' tokenization modules, the tokenizers package)."""


def tokenizer_frame(message: str) -> bool:
    return _TOKENIZER_FRAME.search(message) is not None


@dataclass
class Window:
    """One open traceback: which signatures' frames matched so far, and what already counted in it."""

    start_line: int
    lines: int = 0
    indent: int = 0
    """How far its header was indented (a traceback nested in a warning's text): its exception line is as far."""
    flat: bool = False
    """Opened by an unindented frame: unindented code lines follow (see the module doc)."""
    tokenizer: bool = False
    """A frame of this traceback is a fast tokenizer's."""
    evidence: tuple[str | None, str] | None = None
    """The innermost frame or source line naming the tokenizer (None) or another library, and what it said
    (see scan.attribution)."""
    by_package: bool = False
    """Its evidence names another library only by the package its innermost call's frame is in."""
    last_frame: str = ""
    last_line: str = ""
    """Its innermost frame's first source line (the frame line itself when none follows): the call a cut
    paste stopped at."""
    progress: dict[int, int] = field(default_factory=dict)
    """Signature index -> how many of its frames matched, in order."""
    frames_at: dict[int, tuple[int, str | None, list[str]]] = field(default_factory=dict)
    """Signature index -> (line, timestamp, matched frame texts) of its first matched frame."""
    counted: set[str] = field(default_factory=set)
    """Problem ids already counted for this traceback: one traceback is one occurrence."""
    context: set[str] = field(default_factory=set)
    """Problem ids counted by the log record this traceback belongs to (the message line just above it,
    or the traceback it is chained from): its frames do not count them again."""

    def bare(self) -> bool:
        """Nothing read but its opener: closing it would count nothing."""
        return self.lines == 0 and not self.progress and not self.counted and self.evidence is None
