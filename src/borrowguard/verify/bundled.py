"""The bundled reference server as verify's default target: started for the run, gone after it."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from borrowguard.verify.config import VerifyConfig


async def start_bundled(config: VerifyConfig, stack: contextlib.ExitStack, session: Any) -> str:
    """Start `borrowguard serve` in a subprocess (stopped when `stack` closes); return its URL.

    Its log is followed from the start (it is ours, and fresh). The server also watches us: it exits by
    itself if this process dies without stopping it (even on SIGKILL).
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
    session.server = stack.enter_context(server)
    session.logs.fresh_files.append(Path(log_path))
    return str(server.url)
