"""ServerProcess: the reference server in a real subprocess, for `borrowguard verify` (and tests).

    with ServerProcess(guard=False, workers=4) as server:
        ... load server.url, read server.log_path ...

The child runs `python -m borrowguard serve --port 0 ...` in its own process group; we wait for its
listening line (printed only after a real GET /health returned 200), and keep draining its output on a
thread so that a chatty server can never block on a full pipe.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from borrowguard.errors import BorrowguardError
from borrowguard.server.config import WATCH_STDIN_ENV

LISTENING_RE = re.compile(r"^borrowguard serve: listening on (http://\S+) \(")
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}


class ServerStartError(BorrowguardError):
    """The server did not come up; `output` holds the tail of what it printed."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(f"{message}\n--- server output (tail) ---\n{output}" if output else message)
        self.output = output


class ServerProcess:
    """A `borrowguard serve` subprocess; a context manager (start on enter, stop on exit).

    `log_path`: the server's --log-file. When not given, a temporary file is used and removed by
    `stop()` unless `keep_log` is true.
    """

    def __init__(
        self,
        guard: bool = True,
        tokenizer: Path | None = None,
        workers: int = 4,
        token_delay_ms: float = 0,
        log_path: Path | None = None,
        extra_args: Sequence[str] = (),
        *,
        start_timeout: float = 60.0,
        keep_log: bool = False,
        env: Mapping[str, str] | None = None,
        output_lines: int = 400,
        watch_parent: bool = False,
    ) -> None:
        self.guard = guard
        self.tokenizer = tokenizer
        self.workers = workers
        self.token_delay_ms = token_delay_ms
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.env = dict(env) if env is not None else None
        self.watch_parent = watch_parent  # the server stops by itself when this process dies
        self._own_log = log_path is None
        self._keep_log = keep_log
        self.log_path = Path(log_path) if log_path is not None else None
        self.url: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: deque[str] = deque(maxlen=output_lines)
        self._ready = threading.Event()
        self._eof = False
        self._reader: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    @property
    def command(self) -> list[str]:
        assert self.log_path is not None
        cmd = [sys.executable, "-m", "borrowguard", "serve", "--port", "0",
               "--guard", "on" if self.guard else "off",
               "--tokenizer-workers", str(self.workers),
               "--token-delay-ms", f"{self.token_delay_ms:g}",
               "--log-file", str(self.log_path)]
        if self.tokenizer is not None:
            cmd += ["--tokenizer", str(self.tokenizer)]
        return cmd + self.extra_args

    def start(self) -> ServerProcess:
        if self._proc is not None:
            raise RuntimeError("ServerProcess already started")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="borrowguard-serve-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONUNBUFFERED"] = "1"
        if self.watch_parent:
            env[WATCH_STDIN_ENV] = "1"
        stdin = subprocess.PIPE if self.watch_parent else subprocess.DEVNULL
        self._proc = subprocess.Popen(self.command, stdin=stdin, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._drain, name="borrowguard-serve-output", daemon=True)
        self._reader.start()
        try:
            self._ready.wait(self.start_timeout)
        except BaseException:  # Ctrl-C while waiting: never leave the server behind
            self.stop()
            raise
        if self.url is None:
            code = self._proc.poll()
            if code is None and self._eof:
                # Its output ended: it is exiting; wait for the code rather than report a timeout.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = self._proc.wait(10)
            self.stop()
            why = (f"exited with code {code}" if code is not None
                   else f"was not ready within {self.start_timeout:g} s")
            raise ServerStartError(f"borrowguard serve {why}", self.output_tail())
        return self

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self._output.append(line)
            if self.url is None:
                match = LISTENING_RE.match(line)
                if match:
                    self.url = _connectable(match.group(1))
                    self._ready.set()
        self._eof = True
        self._ready.set()  # EOF: the process is gone, stop waiting

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after `timeout`; return the exit code."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        if self._own_log and not self._keep_log and self.log_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.log_path.unlink()
        return proc.returncode if proc is not None else None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- state ----------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def output_tail(self, lines: int = 60) -> str:
        """The last lines the server printed (stdout and stderr)."""
        return "\n".join(list(self._output)[-lines:])


def _connectable(url: str) -> str:
    for wildcard, loopback in _WILDCARDS.items():
        url = url.replace(f"//{wildcard}:", f"//{loopback}:")
    return url


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
