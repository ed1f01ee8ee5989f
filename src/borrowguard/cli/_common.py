"""Helpers shared by the subcommands."""

from __future__ import annotations

from rich.console import Console


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)
