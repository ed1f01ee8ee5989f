"""scan's threaded follower (scan.Follower), the one that `scan --follow` and verify's log watch run on:
every source in a thread of its own, each line and each end said, a failing source recorded, never raised."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from borrowguard.scan import Follower


def test_each_source_is_read_to_its_end_and_a_failing_one_is_recorded(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("old line\n")
    lines: list[tuple[str, str]] = []
    ends: dict[str, Exception | None] = {}
    lock = threading.Lock()

    def on_line(name: str, line: str) -> None:
        with lock:
            lines.append((name, line))

    def failing() -> Iterator[str]:
        yield "one"
        yield "  "
        raise OSError("the disk went away")

    follower = Follower(on_line, on_end=lambda name, error: ends.__setitem__(name, error))
    follower.add_file(log, start_at=log.stat().st_size, poll_interval=0.02)  # what is written from now on
    follower.add("broken", "stream", failing)
    follower.start()
    with log.open("a") as fh:
        fh.write("new line\nlast line\n")
    # The file is followed until the stop; the failing source ends by itself.
    for _ in range(500):
        with lock:
            if len([n for n, _ in lines if n == str(log)]) == 2:
                break
        threading.Event().wait(0.02)
    follower.stop()
    assert not follower.alive
    assert [line for name, line in lines if name == str(log)] == ["new line", "last line"]
    by_name = {s.name: s for s in follower.states()}
    assert by_name[str(log)].lines == 2 and by_name[str(log)].error is None and by_name[str(log)].kind == "file"
    broken = by_name["broken"]
    assert broken.lines == 2 and broken.last == "one" and isinstance(broken.error, OSError)
    assert ends[str(log)] is None and isinstance(ends["broken"], OSError)


def test_wait_returns_when_every_source_has_ended() -> None:
    seen: list[str] = []
    follower = Follower(lambda name, line: seen.append(line))
    follower.add("a", "stream", lambda: iter(["x", "y"]))
    follower.start()
    follower.wait()
    assert seen == ["x", "y"] and follower.stop_event.is_set()
    assert follower.state("a").lines == 2 and not follower.state("a").exited


def test_lines_written_just_before_the_stop_are_all_handed_on(tmp_path: Path) -> None:
    # The follower waits between polls when the lines arrive; the stop wakes it, and it reads them: every one is
    # handed on, not only the first (a busy machine delays the poll past a verify's last lines)
    log = tmp_path / "server.log"
    log.write_text("")
    seen: list[str] = []
    follower = Follower(lambda source, line: seen.append(line))
    follower.add_file(log, poll_interval=30)
    follower.start()
    time.sleep(0.5)  # the thread has opened the file and waits for its next poll, 30 s away
    with log.open("a") as f:
        f.write("one\ntwo\nthree\n")
    follower.stop(timeout=10)
    assert seen == ["one", "two", "three"]


def test_a_stop_from_outside_still_ends_the_reading(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    stop = threading.Event()
    follower = Follower(lambda source, line: None, stop=stop)
    follower.add_file(log, poll_interval=0.05)
    follower.start()
    stop.set()  # a signal handler sets the event: no grace, the reader ends at its next line or poll
    for thread in follower._threads:
        thread.join(timeout=60)
    assert not follower.alive
