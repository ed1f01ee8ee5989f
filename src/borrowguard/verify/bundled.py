"""The bundled reference server as verify's default target: started for the run, gone after it."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from borrowguard.verify.config import VerifyConfig

if TYPE_CHECKING:
    from borrowguard.server.process import ServerProcess


@dataclass(frozen=True)
class Bundled:
    """A running bundled server: where it answers, its process, and its log (ours, and fresh)."""

    url: str
    process: ServerProcess
    log_path: Path


def start_bundled(config: VerifyConfig, stack: contextlib.ExitStack) -> Bundled:
    """Start `borrowguard serve` in a subprocess (stopped when `stack` closes).

    Its log is to be followed from the start (it is ours, and fresh). The server also watches us: it
    exits by itself if this process dies without stopping it (even on SIGKILL).
    """
    from borrowguard.server.process import ServerProcess

    log_path = config.server_log
    if log_path is None:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="borrowguard-verify-"))
        log_path = Path(tmp) / "server.log"
    server = ServerProcess(
        guard=config.guarded,
        workers=config.server_workers,
        log_path=log_path,
        start_timeout=config.server_start_timeout,
        watch_parent=True,
    )
    process = stack.enter_context(server)
    return Bundled(str(server.url), process, Path(log_path))
