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


# From the bundled server's own log (tests/verify/test_verify_bundled.py, unguarded, tokenizers 0.22.2): the
# preflight probes image and tools at once, and the image probe met the race.
PREFLIGHT_LINES = """\
INFO 12-02 02:58:02 [h11_impl.py:477] 127.0.0.1:54474 - "POST /v1/rerank HTTP/1.1" 404
Traceback (most recent call last):
  File "/work/main/src/borrowguard/server/frontend.py", line 234, in _multimodal_prompt
    encoding = self.tokenizer([expanded], **kwargs)
  File "/work/main/.venv-old/lib/python3.11/site-packages/transformers/tokenization_utils_fast.py", line 510, in set_truncation_and_padding
    self._tokenizer.enable_padding(**target)
RuntimeError: Already borrowed
INFO 12-02 02:58:02 [h11_impl.py:477] 127.0.0.1:54474 - "POST /v1/chat/completions HTTP/1.1" 500
"""


def test_during_the_preflight_only_the_servers_own_errors_count(tmp_path: Path) -> None:
    from borrowguard.verify.verdict import TOKENIZER_IDS
    from borrowguard.verify.watch import PREFLIGHT

    log = tmp_path / "server.log"
    log.write_text("INFO start-up\n")
    level = [PREFLIGHT]
    watch = LogWatch(files=[log], clock=lambda: (level[0], 0.0), preflight_ids=TOKENIZER_IDS)
    watch.start()
    with log.open("a") as f:
        f.write(PREFLIGHT_LINES)
    watch.stop()  # reads to the end: every line above arrives during the preflight
    assert watch.counts["tokenizer-already-borrowed"] == 1
    assert watch.level_counts[PREFLIGHT, "tokenizer-already-borrowed"] == 1
    # the 404 answered our probe of an endpoint the server does not serve, the 500 is the race's: neither
    # is a finding of its own
    assert set(watch.counts) <= TOKENIZER_IDS, watch.counts

    # the same lines once the load runs: the error statuses count
    level[0] = 0
    log2 = tmp_path / "server2.log"
    log2.write_text("")
    watch2 = LogWatch(files=[log2], clock=lambda: (level[0], 0.0), preflight_ids=TOKENIZER_IDS)
    watch2.start()
    with log2.open("a") as f:
        f.write(PREFLIGHT_LINES)
    watch2.stop()
    assert watch2.counts["tokenizer-already-borrowed"] == 1
    assert set(watch2.counts) - TOKENIZER_IDS, watch2.counts


def test_settle_reads_a_file_up_to_where_it_ends_now(tmp_path: Path) -> None:
    """The preflight's last lines are in the file when it ends, but the follower polls: settle() has them
    scanned while the clock still says preflight, so they are not the first level's."""
    from borrowguard.verify.watch import PREFLIGHT

    log = tmp_path / "server.log"
    log.write_text("INFO start-up\n")
    level = [PREFLIGHT]
    watch = LogWatch(files=[log], clock=lambda: (level[0], 0.0))
    watch.start()
    try:
        time.sleep(0.3)  # the follower has opened the file and waits for its next poll
        with log.open("a") as f:
            f.write('INFO 127.0.0.1:1 - "POST /v1/embeddings HTTP/1.1" 404\n' * 3)
        assert asyncio.run(watch.settle()) is True
        assert watch.lines == 3
        level[0] = 0
    finally:
        watch.stop(quiet=0.2)
    assert not watch.counts, watch.counts  # read as the preflight's, so not a finding


def test_a_line_naming_an_endpoint_only_the_preflight_asked_is_its_own(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    watch = LogWatch(files=[log], clock=lambda: (0, 1.0), unrequested=frozenset({"/score", "/v1/embeddings"}))
    watch.start()
    with log.open("a") as f:
        f.write('INFO 127.0.0.1:1 - "POST /v1/embeddings HTTP/1.1" 404\n')  # the discovery's probe, read late
        f.write('INFO 127.0.0.1:2 - "POST /v1/score HTTP/1.1" 404\n')  # another path: the load's
        f.write('INFO 127.0.0.1:3 - "POST /v1/chat/completions HTTP/1.1" 500\n')
    watch.stop(quiet=0.2)
    assert [f.text.split('"')[1] for f in watch.findings] == [
        "POST /v1/score HTTP/1.1", "POST /v1/chat/completions HTTP/1.1"
    ]
