"""Reports of a verify run: the JSON document and a self-contained HTML page rendered from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from borrowguard._files import write_atomic
from borrowguard.report.html import render_html

__all__ = ["render_html", "to_json", "write_html"]


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False, default=str)


def write_html(doc: dict[str, Any], path: Path) -> None:
    _write(path, render_html(doc))


def _write(path: Path, text: str) -> None:
    # Atomic, through symlinks, never onto a device: see borrowguard._files.
    write_atomic(path, text, "the report")
