"""Following a command's output (`docker logs -f vllm`): its lines until it exits or following stops,
then the command and its children stopped.

The command runs in its own process group, and the group is what gets ended. Nothing outlives us: a
command still running when this process exits normally (its stopping thread cut short, a command that
ignores SIGTERM) is killed at exit; if this process is killed outright (SIGKILL), a watchdog in the
command's group — a shell blocked reading a pipe only we hold open — sees the pipe close and kills the
group, the command's own children included.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from borrowguard.errors import ConfigError, UserInputError
from borrowguard.scan.inputs.long_lines import long_lines_note
from borrowguard.scan.inputs.readers import READ_SIZE, LineSplitter
from borrowguard.scan.normalize import decode


def follow_command(
    command: str | Sequence[str],
    stop: threading.Event,
    *,
    grace: float = 3.0,
    on_exit: Callable[[int | None], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Lines a command writes (stdout and stderr: `docker logs` copies the container's stderr to its
    own) until it exits or `stop` is set; then it and its children are terminated (killed after `grace`
    seconds). The command runs without a shell: `"docker logs -f vllm"` is split like a shell would.

    `on_exit(returncode)` is called when the command ended by itself, before `stop` was set (a log
    source that fails or ends early is something to report, not a clean log). `on_note` hears, once,
    that a line was longer than the scanner's cap."""
    proc = _start_command(command_argv(command))
    lines: queue.Queue[bytes | None] = queue.Queue(maxsize=10_000)
    reader = threading.Thread(
        target=_pump_output, args=(proc, lines, on_note), name="borrowguard-follow-cmd", daemon=True
    )
    reader.start()
    try:
        while True:
            try:
                item = lines.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    return
                continue
            if item is None:
                if on_exit is not None and not stop.is_set():
                    on_exit(_exit_status(proc, grace))
                return
            yield decode(item)
    finally:
        _stop_command(proc, lines, reader, grace)


_running: dict[subprocess.Popen[bytes], int] = {}  # commands not yet ended -> our end of their watchdog pipe
_running_lock = threading.Lock()

# Run by /bin/sh as the group leader: fd 9 keeps the watchdog pipe (stdin becomes /dev/null), a background
# reader waits on it with its output away from ours (else the command's end would never read as EOF), and the
# shell then becomes the command. When the pipe closes — we died, however — the reader kills the group.
_WATCHDOG = 'exec 9<&0 </dev/null; { read -r _ <&9; kill -KILL 0; } >/dev/null 2>&1 & exec 9<&- "$0" "$@"'


def _start_command(argv: list[str]) -> subprocess.Popen[bytes]:
    """`argv` running with its stdout and stderr on one pipe; UserInputError when it cannot start."""
    watch_read, watch_write = os.pipe()  # our end stays non-inheritable: only we hold it open
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _WATCHDOG, *argv],
            stdin=watch_read,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops what it started
        )
    except OSError as exc:
        os.close(watch_write)
        raise UserInputError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    finally:
        os.close(watch_read)
    assert proc.stdout is not None
    with _running_lock:
        _running[proc] = watch_write
    return proc


@atexit.register
def _end_the_rest() -> None:
    """At exit, kill the group of every command still running (its stopping thread may be a daemon that
    dies with us before its SIGKILL comes, and a command that ignores SIGTERM would stay behind)."""
    with _running_lock:
        left = list(_running)
    for proc in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _pump_output(
    proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None], on_note: Callable[[str], None] | None
) -> None:
    """The command's output split into capped lines onto `lines` (in its own thread), then None."""
    splitter = LineSplitter(
        on_long=None if on_note is None else lambda n: on_note(long_lines_note(1, n))
    )
    try:
        while True:
            data = proc.stdout.read1(READ_SIZE)  # type: ignore[union-attr]
            if not data:
                break
            for line in splitter.push(data):
                lines.put(line)
        for line in splitter.flush():
            lines.put(line)
    except (OSError, ValueError):
        pass  # the pipe closed under us while stopping
    finally:
        lines.put(None)


def _exit_status(proc: subprocess.Popen[bytes], grace: float) -> int | None:
    """The status of a command whose output ended: None when it has not exited within `grace` seconds."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    return proc.poll()


def _stop_command(
    proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None], reader: threading.Thread, grace: float
) -> None:
    _terminate(proc, grace)
    # Unblock the pump if the queue is full, then let it see the closed pipe.
    with contextlib.suppress(queue.Empty):
        while True:
            lines.get_nowait()
    reader.join(timeout=grace)
    if proc.stdout is not None:
        proc.stdout.close()


def command_argv(command: str | Sequence[str]) -> list[str]:
    """The command split like a shell would (no shell runs it); UserInputError when it cannot run."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:
        raise UserInputError(f"cannot parse the command {command!r}: {exc}") from None
    if not argv:
        raise ConfigError("follow_cmd", '{} needs a command, e.g. "docker logs -f vllm"')
    if shutil.which(argv[0]) is None:
        raise UserInputError(f"command not found: {argv[0]}")
    return argv


def _terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    try:
        if proc.poll() is not None:
            # The command is gone, but what it started may not be: its group ends with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived the command
                    return
                time.sleep(0.02)
        proc.wait(timeout=grace)
    finally:
        with _running_lock:
            watch_write = _running.pop(proc, None)
        if watch_write is not None:
            os.close(watch_write)
