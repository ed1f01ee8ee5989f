"""Stopping a server subprocess that leads its own process group (started with start_new_session=True)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, *, grace_s: float = 20.0) -> None:
    """SIGTERM the group, then SIGKILL it if the leader has not exited within `grace_s`."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
