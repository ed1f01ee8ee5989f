"""borrowguard: exact, lock-free thread safety for Hugging Face fast tokenizers.

Public API::

    import borrowguard
    borrowguard.install()      # every fast tokenizer in the process, before and after this call
    borrowguard.protect(tok)   # one tokenizer or processor, no global patch
    borrowguard.uninstall()    # restore transformers exactly
    borrowguard.is_installed()

Importing this module imports neither transformers nor tokenizers; the guard imports them when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from borrowguard._version import __version__
from borrowguard.errors import BorrowguardError, GuardError, UserInputError

if TYPE_CHECKING:
    from borrowguard.guard import install, is_installed, protect, uninstall

__all__ = [
    "BorrowguardError",
    "GuardError",
    "UserInputError",
    "__version__",
    "install",
    "is_installed",
    "protect",
    "uninstall",
]

_GUARD_API = frozenset({"install", "uninstall", "protect", "is_installed"})


def __getattr__(name: str) -> Any:
    # The guard is loaded on first use so that `import borrowguard` stays cheap (doctor, scan, the CLI).
    if name in _GUARD_API:
        from borrowguard import guard

        return getattr(guard, name)
    raise AttributeError(f"module 'borrowguard' has no attribute {name!r}")
