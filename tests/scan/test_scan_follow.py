"""Follow mode: a growing file (rotation, truncation) and a command's output; real files and processes."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from borrowguard.errors import UserInputError
from borrowguard.scan import Scanner, follow_command, follow_file


def _positions(path: Path) -> list[int]:
    """The file positions of this process's descriptors open on `path` (Linux: /proc/self/fdinfo)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != str(path):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                found += [int(line.split()[1]) for line in info if line.startswith("pos:")]
        except OSError:  # closed meanwhile
            continue
    return found


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


class Collector:
    def __init__(self, lines_iter_factory: Callable[[threading.Event], object]) -> None:
        self.stop = threading.Event()
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._run, args=(lines_iter_factory,), daemon=True)
        self.thread.start()

    def _run(self, factory: Callable[[threading.Event], object]) -> None:
        for line in factory(self.stop):  # type: ignore[attr-defined]
            self.lines.append(line)

    def finish(self) -> list[str]:
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        return self.lines


def append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_follow_file_growth_rotation_truncation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("one\ntwo\n")
    c = Collector(lambda stop: follow_file(log, stop, poll_interval=0.02))
    wait_for(lambda: c.lines == ["one", "two"])
    append(log, "three\npartial")
    wait_for(lambda: c.lines[-1] == "three")
    append(log, " line\n")
    wait_for(lambda: c.lines[-1] == "partial line")
    # rotation: the old file moves away (its last lines are still read), a new one takes the name
    append(log, "last of old\n")
    os.rename(log, tmp_path / "server.log.1")
    log.write_text("first of new\n")
    wait_for(lambda: c.lines[-1] == "first of new")
    # truncation in place (copytruncate)
    with log.open("r+") as fh:
        fh.truncate(0)
    # No pause needed: what follows the cut is shorter than what was read, so the follower sees the cut
    # (size < its position) whether its next poll comes before or after this append.
    append(log, "after\n")
    wait_for(lambda: c.lines[-1] == "after")
    assert c.finish() == ["one", "two", "three", "partial line", "last of old", "first of new", "after"]


def test_follow_file_waits_for_the_file_and_from_end(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    c = Collector(lambda stop: follow_file(log, stop, poll_interval=0.02))
    time.sleep(0.1)
    log.write_text("hello\n")
    wait_for(lambda: c.lines == ["hello"])
    c.finish()
    d = Collector(lambda stop: follow_file(log, stop, poll_interval=0.02, from_end=True))
    # from_end skips what is there when following starts: append only once the follower sits at the end
    # (its descriptor's position, as the kernel reports it), not after a guessed pause.
    wait_for(lambda: _positions(log) == [log.stat().st_size])
    append(log, "new\n")
    wait_for(lambda: d.lines == ["new"])
    assert d.finish() == ["new"]


def test_scanner_fed_by_follow_file_reports_hits_live(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("INFO 07-07 20:12:44 [a.py:1] up\n")
    sc = Scanner()
    hits: list[str] = []
    stop = threading.Event()

    def run() -> None:
        for line in follow_file(log, stop, poll_interval=0.02):
            hits.extend(h.id for h in sc.feed(line, source="vllm.log"))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    append(log, "ERROR 07-07 20:12:45 [b.py:2] Engine core proc EngineCore_DP0 died unexpectedly.\n")
    wait_for(lambda: hits == ["engine-dead"])
    stop.set()
    t.join(timeout=10)
    res = sc.result()
    assert res.lines == 2
    assert res.findings[0].first.timestamp == "07-07 20:12:45"


@pytest.mark.slow
def test_follow_command_reads_output_and_kills_it_on_stop(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = (
        "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
        "print('a', flush=True); print('b', file=sys.stderr, flush=True); time.sleep(3600)"
    )
    c = Collector(lambda stop: follow_command([sys.executable, "-c", code, str(marker)], stop, grace=2))
    wait_for(lambda: sorted(c.lines) == ["a", "b"])
    started = time.monotonic()
    c.finish()
    # The command would sleep an hour: ending well before that means it was stopped, not waited for
    # (a generous bound: only a hang fails it, never a busy machine).
    assert time.monotonic() - started < 300
    pid = int(marker.read_text())
    wait_for(lambda: not _alive(pid), timeout=10)


@pytest.mark.slow
def test_follow_command_ends_when_the_command_exits() -> None:
    stop = threading.Event()
    cmd = f"{shlex.quote(sys.executable)} -c \"print('x'); print('RuntimeError: Already borrowed')\""
    assert list(follow_command(cmd, stop)) == ["x", "RuntimeError: Already borrowed"]


def test_follow_command_not_found() -> None:
    with pytest.raises(UserInputError, match="command not found"):
        list(follow_command("no-such-command-borrowguard --x", threading.Event()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
