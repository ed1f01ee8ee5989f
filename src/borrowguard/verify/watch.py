"""verify's sensors, beside the load: the server's log (through the scan engine), its health, /metrics.

The log is read with scan's threaded follower (`scan.Follower`: files and commands block, so each source
has a thread); their lines cross into the event loop through a bounded queue (a flooding log slows its
reader down instead of filling memory), and the scan engine runs on the loop thread only. Each of scan's
`Hit`s becomes a `LogEvent`: the hit, and when in the run it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from borrowguard._text import mask

if TYPE_CHECKING:
    from borrowguard.scan import Follower, Hit, SourceState
    from borrowguard.scan.startup import StartupFacts

_MAX_FINDINGS = 200  # findings kept verbatim; the counts stay exact
_MAX_LINE = 4096
_MAX_METRICS_BODY = 4 << 20
PREFLIGHT = -1  # the level of a finding that arrived before the first level of load


@dataclass(frozen=True)
class LogEvent:
    """A log finding of the run: which problem, where in the log, and when in the run it arrived."""

    t: float  # seconds since the current level started, on arrival
    level: int
    id: str
    severity: str
    source: str
    line_no: int | None
    text: str

    @classmethod
    def of(cls, hit: Hit, level: int, t: float) -> LogEvent:
        return cls(t, level, hit.id, str(hit.severity), hit.source, hit.line_no, hit.text[:500])


@dataclass(frozen=True)
class LogSource:
    """One followed log source at the end of the run: lines read, and what stopped it early (None: it was
    followed to the end)."""

    source: str
    kind: str  # "file" or "command"
    lines: int
    error: str | None = None
    exit_code: int | None = None  # a command that ended by itself: its status
    exited: bool = False


@dataclass
class LogWatch:
    """Follows `files` and `commands` and scans each line; `findings` keeps a bounded sample.

    Files are followed from where they end when the preflight starts (an operator's log holds the errors of
    last week); their start-up lines are still read for the configuration. During the preflight (`clock` says
    level PREFLIGHT) only `preflight_ids` count; `settle()` reads what the preflight made the server write
    before the load starts, and a line naming a path the load never asks (`unrequested`: the endpoints the
    discovery found not served) is the preflight's whenever it arrives.
    """

    files: list[Path] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    on_finding: Callable[[LogEvent], None] | None = None
    findings: list[LogEvent] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    level_counts: Counter = field(default_factory=Counter)  # (level, id) -> n, exact
    lines: int = 0
    secrets: tuple[str, ...] = ()  # masked in every line as it comes in, before any cut
    clock: Callable[[], tuple[int, float]] = lambda: (0, 0.0)  # (level, t) for a new finding
    # What counts of what the log says during the preflight: its probes' answers (404s for the endpoints a
    # server does not serve) are ours, but a tokenizer error its concurrent probes caused is the server's.
    preflight_ids: frozenset[str] = frozenset()
    unrequested: frozenset[str] = frozenset()  # paths only the preflight asked: their lines are its own

    def __post_init__(self) -> None:
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue(maxsize=20_000)
        self._follower: Follower | None = None
        self._scanner: Any = None
        self._head_facts: StartupFacts | None = None
        self._file_starts: dict[str, int] = {}  # a followed file's name -> the size it had when following began

    @property
    def active(self) -> bool:
        return bool(self.files or self.commands)

    def start(self) -> None:
        from borrowguard.scan import Follower, Scanner

        self._scanner = Scanner()
        self._follower = follower = Follower(self._enqueue)
        for cmd in self.commands:
            follower.add_command(cmd)
        for path in self.files:
            self._head_facts = _merged(self._head_facts, _startup_facts(path))
            # Where the file ends now, not when the follower thread gets to open it: lines written
            # right after start() belong to the run.
            self._file_starts[str(path)] = start_at = path.stat().st_size if path.exists() else 0
            follower.add_file(path, start_at=start_at)
        follower.start()

    def _enqueue(self, source: str, line: str) -> None:
        """A line from a source's thread: waits for room in the queue (a flooding log slows its reader),
        never past the stop."""
        assert self._follower is not None
        line = mask(line, self.secrets)[:_MAX_LINE]
        while not self._follower.stop_event.is_set():
            try:
                self._queue.put((source, line), timeout=0.2)
                return
            except queue.Full:
                continue

    def server_config(self) -> StartupFacts | None:
        """The server's configuration from its start-up lines, where a log showed them (else None): those
        followed live, over the head of a file followed from its end (where start-up was logged)."""
        live = self._scanner.startup_facts() if self._scanner is not None else None
        return _merged(self._head_facts, live)

    def sources_state(self) -> list[LogSource]:
        """Per log source: lines read, and the error that stopped it early (None when it ran to the end)."""
        return [_log_source(s) for s in (self._follower.states() if self._follower is not None else [])]

    async def run(self) -> None:
        """Drain the queue into the scanner until cancelled."""
        while True:
            self.drain()
            # A matched line still waiting for its context is decided once its log has been quiet, so the
            # finding is timed (and given to its level) when the server wrote it, not 200 lines later.
            for hit in self._scanner.settle_idle():
                self._record(hit)
            await asyncio.sleep(0.05)

    async def settle(self, longest: float = 5.0, quiet: float = 0.5) -> bool:
        """Read what the sources hold now, before the load starts, so that the lines the preflight made the
        server write are scanned as the preflight's: a file up to where it ends now (the follower polls it,
        so its last lines may not have been read yet), a command until it has been quiet for `quiet` seconds;
        at most `longest` seconds in all (a busy log never goes quiet). True: every source caught up."""
        if self._follower is None:
            return True
        loop = asyncio.get_running_loop()
        ends = {name: _lines_between(Path(name), start) for name, start in self._file_starts.items()}
        give_up = loop.time() + longest
        seen, quiet_since = -1, loop.time()
        while True:
            self.drain()
            states = {s.name: s for s in self._follower.states()}
            files_read = all(
                name not in states or states[name].lines >= end or states[name].error is not None
                for name, end in ends.items()
            )
            command_lines = sum(s.lines for s in states.values() if s.kind == "command")
            if command_lines != seen:
                seen, quiet_since = command_lines, loop.time()
            commands_quiet = not self.commands or loop.time() - quiet_since >= quiet
            if (files_read and commands_quiet) or not self._follower.alive:
                self.drain()
                return True
            if loop.time() >= give_up:
                return False
            await asyncio.sleep(0.05)

    def drain(self, limit: int = 5000) -> int:
        """Scan up to `limit` queued lines; the number scanned."""
        for n in range(limit):
            try:
                source, line = self._queue.get_nowait()
            except queue.Empty:
                return n
            self.lines += 1
            for hit in self._scanner.feed(line.rstrip("\r\n"), source=source):
                self._record(hit)
        return limit

    def _record(self, hit: Hit) -> None:
        level, t = self.clock()
        preflights = level == PREFLIGHT or _names_any(hit.text, self.unrequested)
        if preflights and hit.id not in self.preflight_ids:
            return
        self.counts[hit.id] += 1
        self.level_counts[level, hit.id] += 1
        finding = LogEvent.of(hit, level, t)
        if len(self.findings) < _MAX_FINDINGS:
            self.findings.append(finding)
        if self.on_finding is not None:
            self.on_finding(finding)

    def stop(self, quiet: float = 1.0, longest: float = 5.0) -> None:
        """Stop following once the sources have been quiet for `quiet` seconds (at most `longest`): lines the
        server wrote just before the end still count, though a log command (`tail -F`, `kubectl logs -f`) hands
        them on late, the later the busier the machine."""
        if self._scanner is None or self._follower is None:
            return
        now = time.monotonic()
        last_line, give_up = now, now + longest
        while now < give_up and now - last_line < quiet and self._follower.alive:
            if self.drain():
                last_line = time.monotonic()
            time.sleep(0.05)
            now = time.monotonic()
        self._follower.stop(timeout=2)
        self.drain(limit=1_000_000)
        # A traceback still open at the end (the server was killed inside it) counts as cut off.
        for hit in self._scanner.finish():
            self._record(hit)


def _names_any(text: str, paths: frozenset[str]) -> bool:
    """Whether `text` names one of `paths` as a whole path ("/score" is not named by "/v1/score")."""
    return any(re.search(rf"(?<![\w/.-]){re.escape(p)}(?![\w/-])", text) for p in paths)


def _lines_between(path: Path, start: int, limit: int = 16 << 20) -> int:
    """The whole lines `path` holds after its first `start` bytes (at most `limit` bytes read): how many the
    follower has to have read to have caught up with it."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(limit).count(b"\n")
    except OSError:
        return 0


def _log_source(state: SourceState) -> LogSource:
    error = f"{type(state.error).__name__}: {state.error}" if state.error is not None else None
    if error is None and state.exited:
        error = f"the command ended early (exit code {state.exit_code})" + ("" if state.lines else " without a line")
    return LogSource(state.name, state.kind, state.lines, error, state.exit_code, state.exited)


def _merged(earlier: StartupFacts | None, later: StartupFacts | None) -> StartupFacts | None:
    if earlier is None:
        return later
    return earlier if later is None else earlier.merged(later)


def _startup_facts(path: Path, limit: int = 4 << 20) -> StartupFacts | None:
    """The server configuration the first `limit` bytes of a log show (its start-up lines)."""
    from borrowguard.scan import Scanner

    scanner = Scanner()
    try:
        with open(path, "rb") as fh:
            for raw in fh.read(limit).splitlines():
                scanner.feed(raw.decode("utf-8", "replace")[:_MAX_LINE], source=str(path))
    except OSError:
        return None
    return scanner.startup_facts()


@dataclass
class HealthWatch:
    """Polls `url` every `interval` seconds. A 404 on the first poll means "no health endpoint"."""

    url: str
    interval: float = 1.0
    timeout: float = 5.0
    polls: int = 0
    failures: int = 0
    consecutive: int = 0
    refused_consecutive: int = 0
    succeeded_once: bool = False
    unsupported: bool = False
    last_error: str | None = None
    first_failure: str | None = None
    on_failure: Callable[[str], None] | None = None

    @property
    def failing(self) -> bool:
        """Dead rather than slow: refused twice in a row, or three failed polls in a row."""
        return self.refused_consecutive >= 2 or self.consecutive >= 3

    async def run(self, session: aiohttp.ClientSession) -> None:
        while not self.unsupported:
            await self.poll(session)
            await asyncio.sleep(self.interval)

    async def poll(self, session: aiohttp.ClientSession) -> None:
        self.polls += 1
        error = None
        try:
            async with session.get(self.url, timeout=aiohttp.ClientTimeout(total=self.timeout),
                                   allow_redirects=False) as resp:  # never to another origin
                await resp.content.read(1024)
                if resp.status == 404 and not self.succeeded_once and self.polls == 1:
                    self.unsupported = True
                    return
                if not 200 <= resp.status < 300:
                    error = f"HTTP {resp.status}"
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            error = "connection refused" if refused else f"cannot connect: {exc.os_error}"
            self.refused_consecutive = self.refused_consecutive + 1 if refused else 0
        except asyncio.TimeoutError:  # its str() is empty: say what timed out, after how long
            error = f"no answer within {self.timeout:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if error is None:
            self.succeeded_once = True
            self.consecutive = self.refused_consecutive = 0
            return
        if "refused" not in error:
            self.refused_consecutive = 0
        self.failures += 1
        self.consecutive += 1
        self.last_error = error
        self.first_failure = self.first_failure or error
        if self.on_failure is not None:
            self.on_failure(error)

    def summary(self) -> HealthSummary:
        return HealthSummary(self.url, not self.unsupported, self.polls, self.failures, self.first_failure,
                             self.last_error)


@dataclass(frozen=True)
class HealthSummary:
    """The health watch at the end of a run (the run document's `health`)."""

    url: str
    supported: bool  # False: the first poll got a 404, there is no health endpoint
    polls: int
    failures: int
    first_failure: str | None
    last_error: str | None


@dataclass(frozen=True)
class MetricsScrape:
    """The server's request-related /metrics series before and after the load (None: no page)."""

    before: dict[str, float] | None
    after: dict[str, float] | None


_INTERESTING = ("request", "running", "waiting", "preempt", "error", "abort", "success")
_MAX_SERIES = 40
_MAX_LABELS_TEXT = 200
_MAX_RETRIED_LINES = 1000  # a page of nothing but bad lines costs at most this many parser calls


async def scrape_metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float] | None:
    """The request-related series of a Prometheus /metrics page (None when there is none)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=5), allow_redirects=False) as resp:
            if resp.status != 200:
                return None
            raw = await resp.content.read(_MAX_METRICS_BODY)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return None
    return parse_metrics(raw.decode("utf-8", errors="replace"))


def parse_metrics(text: str) -> dict[str, float]:
    """{`name{labels}`: value} for at most 40 request-related samples, labels in the page's order.

    prometheus_client's parser does the parsing. It stops at the first malformed line of a page, and
    a page may be cut at our size limit, so the lines worth keeping (by metric name) are picked first
    and, if the parser rejects them together, parsed one by one: one bad line costs only itself.
    """
    lines = [line for line in text.splitlines() if _wanted(line)]
    try:
        return _samples([text_string_to_metric_families("\n".join(lines) + "\n")])
    except ValueError:
        return _samples(_each(lines))


def _wanted(line: str) -> bool:
    # Only the name is looked at here; histogram buckets and _created timestamps are not counts.
    name = line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""
    return (
        not name.startswith("#")
        and any(word in name for word in _INTERESTING)
        and not name.endswith(("_bucket", "_created"))
    )


def _each(lines: list[str]) -> Iterator[Iterable[Metric]]:
    for line in lines[:_MAX_RETRIED_LINES]:
        families = text_string_to_metric_families(line + "\n")
        with contextlib.suppress(ValueError):
            yield list(families)


def _samples(parsed: Iterable[Iterable[Metric]]) -> dict[str, float]:
    samples: dict[str, float] = {}
    for families in parsed:
        for family in families:
            for sample in family.samples:
                if len(samples) >= _MAX_SERIES:
                    return samples
                value = float(sample.value)
                if math.isfinite(value):  # NaN/Inf would make the JSON report invalid (allow_nan=False)
                    samples[sample.name + _label_text(sample.labels)] = value
    return samples


def _label_text(labels: dict[str, str]) -> str:
    # The labels as the exposition format writes them, so a key reads like the line it came from.
    if not labels:
        return ""
    escaped = (v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in labels.values())
    return ("{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, escaped)) + "}")[:_MAX_LABELS_TEXT]
