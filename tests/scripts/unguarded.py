"""The serial reference of a workload, computed unguarded even in a process that `borrowguard run` guards.

    expected = serial_unguarded(load, calls)   # load() -> a fresh tokenizer (or processor)

Under `borrowguard run` the guard is installed as soon as transformers is imported; a reference computed
then would go through the code under test. The guard is taken off for the reference and put back after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def serial_unguarded(load: Callable[[], Any], calls: Sequence[Any]) -> list[Any]:
    import borrowguard
    from borrowguard.race import reference

    was_installed = borrowguard.is_installed()
    if was_installed:
        borrowguard.uninstall()
    try:
        assert not borrowguard.is_installed()
        return reference(load(), calls)  # a fresh object, loaded and called with no guard anywhere
    finally:
        if was_installed:
            borrowguard.install()
