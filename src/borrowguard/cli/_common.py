"""Helpers shared by the subcommands."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import NoReturn

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from borrowguard._text import printable
from borrowguard.errors import UserInputError
from borrowguard.exit_codes import ExitCode


class _PrintableConsole(Console):
    """A console whose text cannot drive the terminal: whatever a log, a snapshot or a server put in a
    string (a window-title OSC, `ESC[2J`, C1 controls), only printable text reaches the screen. Rich's own
    styles are added after rendering and its control segments (cursor moves of a live display) are kept."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control is None and text and not text.isprintable() and text != "\n":
                yield Segment(printable(text), segment.style)
            else:
                yield segment


    def on_broken_pipe(self) -> None:
        # Rich exits 1 here, which reads as "warnings"; whoever read our output went away: 141, as a filter.
        self.quiet = True
        silence_stdout()
        raise SystemExit(ExitCode.BROKEN_PIPE)




def console(stderr: bool = False) -> Console:
    return _PrintableConsole(stderr=stderr, highlight=False, soft_wrap=False)


@contextlib.contextmanager
def writing_output() -> Iterator[None]:
    """Around the part of a command that writes its report to stdout: a write that fails (a full disk,
    `> /dev/full`, an I/O error) is one line `borrowguard: error: ...` and exit 2, not a traceback. A closed
    pipe is left to the group's handler (exit 141, like any filter)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        _cannot_write(exc)
    except SystemExit:
        _flush()
        raise
    _flush()


def _flush() -> None:
    try:  # what is still buffered fails here, not in the interpreter's final flush
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        _cannot_write(exc)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what is left cannot fail again
    (after a closed pipe or a full disk)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):
        pass


def _cannot_write(error: OSError) -> NoReturn:
    silence_stdout()
    raise UserInputError(f"cannot write the output: {error.strerror or error}") from None
