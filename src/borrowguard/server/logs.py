"""Logging in vLLM's format, so that `borrowguard scan` reads our logs like a real server's.

    INFO 11-30 10:12:41 [app.py:120] message
    ERROR 11-30 10:12:42 [frontend.py:88] Tokenization failed
    Traceback (most recent call last):
      ...
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

LOGGER_NAME = "borrowguard.server"
FORMAT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
DATE_FORMAT = "%m-%d %H:%M:%S"


def get_logger() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def configure(log_file: Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send the server's records to stdout and, when given, to `log_file` (appended, like vLLM's redirects).

    Replaces handlers from an earlier call so that a second server in the same process (tests) does not
    write every line twice.
    """
    logger = get_logger()
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    formatter = logging.Formatter(FORMAT, DATE_FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    if log_file is not None:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    # uvicorn's own errors (bind failures, protocol errors) should land in the same places, same format.
    # The access lines too, as vLLM logs them: an operator's log shows every answer's status, and a
    # follower of this log (verify, fleet runs) sees it live even while nothing goes wrong.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers = list(handlers)
        uv.propagate = False
    return logger
