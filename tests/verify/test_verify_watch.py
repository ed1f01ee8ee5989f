"""verify's log watch (verify/watch.py) on a real followed file: when a finding is recorded, not only whether."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from borrowguard.verify.watch import LogEvent, LogWatch

BARE = "RuntimeError: Already borrowed\n"  # no traceback around it: scan waits for context before deciding


def test_a_bare_line_is_decided_while_the_log_is_quiet_not_at_the_stop(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO started\n")
    seen = threading.Event()
    live: list[LogEvent] = []

    def on_finding(event: LogEvent) -> None:
        live.append(event)
        seen.set()

    watch = LogWatch(files=[log], on_finding=on_finding, clock=lambda: (1, 0.0))
    watch.start()

    async def follow_until_seen() -> None:
        task = asyncio.create_task(watch.run())
        with log.open("a") as f:
            f.write(BARE)
        # The log stays quiet: the finding must come from the running watch, long before any stop.
        deadline = time.monotonic() + 120  # a hang bound, generous for a busy machine
        while not seen.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()

    try:
        asyncio.run(follow_until_seen())
        assert [e.id for e in live] == ["tokenizer-already-borrowed"], live
        assert watch.level_counts[1, "tokenizer-already-borrowed"] == 1
    finally:
        watch.stop()
    assert watch.counts["tokenizer-already-borrowed"] == 1  # decided once, not again at the stop
