"""A log command (`--log-cmd`, `scan --follow-cmd`) never outlives the process that follows it: not after a
normal exit that cut its stopping short, not when it ignores SIGTERM, not when the follower is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# A log command that ignores SIGTERM and says nothing, writing its pid (and its child's) first.
STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
    open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
    print("started", flush=True)
    time.sleep(3600)
    """
)

# The follower: follow_command in a daemon thread, as verify's log watch runs it; `normal` stops it and
# exits while the command is still being stopped (the SIGKILL would come after 3 s), `killed` waits to be
# SIGKILLed.
FOLLOWER = textwrap.dedent(
    """
    import sys, threading, time
    from borrowguard.scan import follow_command
    how, stubborn, pids = sys.argv[1:4]
    stop = threading.Event()
    seen = threading.Event()

    def run():
        for line in follow_command([sys.executable, stubborn, pids], stop, grace=3.0):
            seen.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    seen.wait(120)
    print("following", flush=True)
    if how == "normal":
        stop.set()
        thread.join(0.5)  # less than the grace: the thread is still stopping when we exit
        sys.exit(0)
    time.sleep(3600)
    """
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead (nobody reaps it here)
    except FileNotFoundError:
        return True


def _wait_gone(pids: list[int], bound: float = 60.0) -> list[int]:
    """The pids still alive after `bound` seconds (a hang bound: they die at once when the fix works)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        alive = [p for p in pids if not _gone(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return alive


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["normal", "killed"])
def test_the_log_command_and_its_children_end_with_the_follower(how: str, tmp_path: Path) -> None:
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(STUBBORN)
    pids_file = tmp_path / "pids"
    follower = subprocess.Popen([sys.executable, "-c", FOLLOWER, how, str(stubborn), str(pids_file)],
                                stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline().strip() == "following"
        pids = [int(p) for p in pids_file.read_text().split()]
        if how == "killed":
            follower.send_signal(signal.SIGKILL)
        assert follower.wait(timeout=120) == (0 if how == "normal" else -signal.SIGKILL)
        alive = _wait_gone(pids)
        assert alive == [], f"left running after the follower ended ({how}): {alive}"
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
