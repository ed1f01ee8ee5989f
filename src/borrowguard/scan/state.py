"""What the scanner remembers about one source between lines, in bounded memory.

Open tracebacks (one per process), the last timestamp, the server's start-up phase, occurrences held back
while it is unknown whether the server was still starting, possible hangs (a stall marker with nothing
after it yet) and the exceptions that ended tracebacks (EngineCore's own final exception is an engine
death's cause).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from borrowguard.scan.attribution import Attribution
from borrowguard.scan.model import Hit
from borrowguard.scan.startup import Phase
from borrowguard.scan.tracebacks import Window

PENDING_LINES = 500
"""An occurrence held back because the server might still be starting counts once this many more lines
came without a start-up line (or at the end of the input)."""
MAX_PENDING = 64
MAX_EXCEPTIONS = 256
CONTEXT_LINES = 4
"""A traceback that starts at most this many lines after an occurrence of the same process (its log
record's message, or the traceback it is chained from) belongs to that occurrence."""
CAUSE_REACH = 300
"""An engine death's cause is an exception that ended a traceback at most this many lines away."""


@dataclass(frozen=True)
class Stall:
    line_no: int
    timestamp: str | None
    process: str | None
    text: str


@dataclass(frozen=True)
class Ended:
    """An exception line that ended a traceback."""

    line_no: int
    process: str | None
    text: str
    tokenizer: bool
    """The traceback (or the one it was chained from) ran through tokenizer frames."""


@dataclass
class SourceState:
    name: str
    line_no: int = 0
    last_ts: tuple[str, int] | None = None
    windows: dict[str | None, Window] = field(default_factory=dict)
    starting: bool | None = None
    """True while the server is starting up, False once it serves, None when the log has not said."""
    pending: list[Hit] = field(default_factory=list)
    stalls: dict[int, Stall] = field(default_factory=dict)
    """Signature index -> its latest stall marker not followed by a resume marker."""
    ended: deque[Ended] = field(default_factory=lambda: deque(maxlen=MAX_EXCEPTIONS))
    chained_tokenizer: dict[str | None, int] = field(default_factory=dict)
    """Process -> line of the last traceback through tokenizer frames (a chained traceback inherits it)."""
    attribution: Attribution = field(default_factory=Attribution)
    """Evidence lines and matched lines waiting for theirs (scan.attribution)."""
    recent: dict[str | None, tuple[int, frozenset[str]]] = field(default_factory=dict)
    """Process -> (line, problem ids) of its latest occurrences, for the traceback that may follow."""
    change_at: int | None = None
    """The line of the latest cue of a change's description (knowledge.ChangeProse)."""
    fenced: bool = False
    """Inside a Markdown code fence: pasted output, not prose."""
    busy_at: dict[str, int] = field(default_factory=dict)
    """Problem id -> the line of its latest occurrence while the server was starting (a busy start-up's, not
    counted)."""

    def note_recent(self, process: str | None, line_no: int, ids: set[str] | frozenset[str]) -> None:
        if ids:
            if len(self.recent) >= MAX_EXCEPTIONS:
                self.recent.clear()
            self.recent[process] = (line_no, frozenset(ids))

    def context_for(self, process: str | None, line_no: int) -> frozenset[str]:
        recent = self.recent.get(process)
        if recent is None or line_no - recent[0] > CONTEXT_LINES:
            return frozenset()
        return recent[1]

    def on_phase(self, phase: Phase) -> list[Hit]:
        """A start-up line: the held-back occurrences it settles (to record); the others are dropped."""
        if phase is Phase.PROGRESS and self.starting is False:
            return []  # a serving server loading something (an adapter, a wake-up) is not starting again
        held, self.pending = self.pending, []
        if phase is Phase.BEGIN:
            self.starting = True
            return held  # a new run begins: what was held belonged to the previous one, which served
        self.starting = phase is Phase.PROGRESS
        return []  # the server was still starting when they were logged

    def stuck_starting(self, problem_id: str, line_no: int) -> bool:
        """Whether an occurrence while the server is starting may say the start-up is stuck rather than busy:
        it follows another right after, nothing logged between (a compiling or loading server logs its progress
        between 60 s stall warnings; a stuck one logs only the warnings). Held back like one logged before the
        log said whether the server was starting, it counts unless a start-up line comes after it."""
        previous = self.busy_at.get(problem_id)
        self.busy_at[problem_id] = line_no
        return previous == line_no - 1

    def hold(self, hit: Hit) -> None:
        if len(self.pending) < MAX_PENDING:
            self.pending.append(hit)

    def due(self) -> list[Hit]:
        """Held-back occurrences old enough to count."""
        if not self.pending or self.line_no - self.pending[0].line_no < PENDING_LINES:
            return []
        due = [h for h in self.pending if self.line_no - h.line_no >= PENDING_LINES]
        self.pending = self.pending[len(due) :]
        return due

    def end_traceback(self, line_no: int, process: str | None, text: str, tokenizer: bool) -> None:
        chained = self.chained_tokenizer.get(process)
        via = tokenizer or (chained is not None and line_no - chained <= CAUSE_REACH)
        if tokenizer:
            self.chained_tokenizer[process] = line_no
        self.ended.append(Ended(line_no, process, text, via))
