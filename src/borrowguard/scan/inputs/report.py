"""What to tell the operator about the inputs themselves: warnings (the input is incomplete: exit 1 at
least), failures (a log source failed: exit 2) and notes, collected from any reading thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from borrowguard._text import printable
from borrowguard.scan.inputs.stream import Opened
from borrowguard.scan.model import ScanResult

MAX_MESSAGES = 20
MAX_MESSAGE = 400


@dataclass
class InputReport:
    """Said about the inputs themselves, from any reading thread: warnings make the scan incomplete (exit 1
    at least), a failure means a log source failed (exit 2), notes change nothing."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def warn(self, message: str) -> None:
        self._add(self.warnings, message)

    def fail(self, message: str) -> None:
        with self._lock:
            self.failed = True
        self._add(self.warnings, message)

    def note(self, message: str) -> None:
        self._add(self.notes, message)

    def read(self, opened: Opened) -> None:
        """What reading `opened` to its end revealed."""
        for message in opened.problems():
            self.warn(message)
        for message in opened.notes():
            self.note(message)

    def _add(self, target: list[str], message: str) -> None:
        message = printable(" ".join(message.split()))
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1] + "…"
        with self._lock:
            if message not in target and len(target) < MAX_MESSAGES:
                target.append(message)

    def apply(self, result: ScanResult) -> ScanResult:
        """`result` with these warnings, notes and failure added."""
        with self._lock:
            result.warnings.extend(m for m in self.warnings if m not in result.warnings)
            result.notes.extend(m for m in self.notes if m not in result.notes)
            result.input_failed = result.input_failed or self.failed
        return result
