"""Child side of `borrowguard run`: install the guard when, and only if, the process imports transformers.

Runs inside every Python process the command starts (through the bootstrap `sitecustomize`), so it imports
only the standard library. A process that never imports transformers pays for one entry on `sys.meta_path`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
from types import ModuleType
from typing import Any

from borrowguard._switches import DISABLE_ENV, QUIET_ENV, flag

# The environment contract between `borrowguard run` (launch.py) and its children.
BOOTSTRAP_ENV = "BORROWGUARD_RUN_BOOTSTRAP"  # the bootstrap directory on PYTHONPATH
PACKAGE_ENV = "BORROWGUARD_PACKAGE_DIR"  # where to load borrowguard from if the child's env lacks it
TARGET = "transformers"

_lock = threading.Lock()
_done = False
_busy = threading.local()


def arm() -> None:
    """Install the guard now if transformers is already loaded, else as soon as it is imported."""
    if flag(DISABLE_ENV):
        return
    if TARGET in sys.modules:
        activate()
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def activate() -> None:
    """Install the guard once in this process and say so on stderr (unless BORROWGUARD_QUIET)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
    try:
        import borrowguard

        if not borrowguard.is_installed():
            borrowguard.install()
    except Exception as exc:  # the child must run even when the guard cannot; say why, always
        _say(f"borrowguard: warning: guard NOT installed in pid {os.getpid()} ({type(exc).__name__}: {exc})")
        return
    if not flag(QUIET_ENV):
        _say(f"borrowguard: guard installed ({_versions()}, pid {os.getpid()})")


def _versions() -> str:
    parts = []
    for name in ("transformers", "tokenizers"):
        module = sys.modules.get(name)
        parts.append(f"{name} {getattr(module, '__version__', '?')}")
    return ", ".join(parts)


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # a closed or missing stderr must not break the child
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of `transformers` so the guard follows its import.

    It stays on sys.meta_path until transformers has really been executed: libraries often call
    `importlib.util.find_spec("transformers")` only to test for it, and that must not disarm us.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != TARGET or getattr(_busy, "on", False):
            return None
        _busy.on = True  # the other finders may call find_spec themselves: do not find ourselves
        try:
            spec = None
            for finder in list(sys.meta_path):  # the order the import system would use
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            _busy.on = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then installs the guard once transformers' __init__ has run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Put the real loader back first: importlib.resources and friends ask the module's loader.
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        self._inner.exec_module(module)
        for finder in [f for f in sys.meta_path if isinstance(f, _Finder)]:
            sys.meta_path.remove(finder)  # done: later imports find transformers in sys.modules
        activate()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
