"""The suite's one rule about itself: what starts a process or a server is marked `slow`, and this checks it.

Tests are grouped by subject (tests/guard, tests/scan, tests/verify, ...); pyproject's `pythonpath` puts
tests/ on sys.path, so every folder imports the shared scaffolding as `support`. Test file names are unique
across folders (pytest imports them by their base name).

`pytest -m "not slow"` is the developer's loop and must stay under a minute, so the marker is not trusted: a
test that is not marked slow and starts a process (subprocess, multiprocessing, fork) or listens on a socket
fails with a message naming what it started. The check covers everything run for the test, the set-up of
module- and session-scoped fixtures it triggers included. tests/vllm and tests/vllm_serve (real vLLM, run
only by their make targets) are slow as a whole. A long hammer has no such sign: those carry the mark by
hand, and the summary lists the fast-lane tests that took over FAST_LANE_BUDGET seconds, to be marked.
"""

from __future__ import annotations

import multiprocessing.util
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SLOW_FOLDERS = ("vllm", "vllm_serve")
FAST_LANE_BUDGET = 5.0  # seconds; a report, never an assertion

_current: pytest.Item | None = None
_started: dict[str, list[str]] = {}
_long: list[tuple[float, str]] = []


def _is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def _importing() -> bool:
    """Whether a module is being imported: its import-time side effects are the process's, once, not the
    test's (transformers' lazy imports reach cuda-bindings, whose ctypes.util.find_library runs ldconfig in
    whichever test first touches that path, so the failure would move with the test order)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _record(what: str) -> None:
    item = _current
    if item is not None and not _is_slow(item) and not _importing():
        _started.setdefault(item.nodeid, []).append(what)


def _watch(owner: Any, name: str, what: str) -> None:
    original: Callable[..., Any] | None = getattr(owner, name, None)
    if original is None:
        return

    def watched(*args: Any, **kwargs: Any) -> Any:
        _record(what)
        return original(*args, **kwargs)

    setattr(owner, name, watched)


def pytest_configure(config: pytest.Config) -> None:
    # Once for the session, before any test: a module-scoped server fixture starts inside its first test.
    _watch(subprocess.Popen, "_execute_child", "a subprocess")
    _watch(os, "fork", "os.fork")
    _watch(os, "posix_spawn", "os.posix_spawn")
    _watch(os, "posix_spawnp", "os.posix_spawnp")
    _watch(multiprocessing.util, "spawnv_passfds", "a multiprocessing child")
    _watch(socket.socket, "listen", "a listening socket (a server)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(str(item.path)).resolve().relative_to(HERE)
        if rel.parts and rel.parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _current
    _current = item
    try:
        yield
    finally:
        _current = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "call" and not _is_slow(item) and report.duration > FAST_LANE_BUDGET:
        _long.append((report.duration, item.nodeid))
    started = _started.pop(item.nodeid, None) if report.when == "teardown" else None
    if started and report.passed:
        kinds = ", ".join(sorted(set(started)))
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started {kinds} but is not marked slow: mark it (or its module) "
            "@pytest.mark.slow, so that `pytest -m 'not slow'` stays a fast loop (tests/conftest.py)"
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _long:
        terminalreporter.write_sep("-", f"fast-lane tests over {FAST_LANE_BUDGET:.0f} s (mark them slow?)")
        for duration, nodeid in sorted(_long, reverse=True):
            terminalreporter.write_line(f"{duration:6.1f}s {nodeid}")
