"""pyproject's package-data declares exactly the non-Python files the package has: each pattern matches
something (a stale one hides a file that moved), and each such file is matched (or the wheel lacks it)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "borrowguard"


def _patterns() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["package-data"]["borrowguard"]


def _matched(pattern: str) -> set[Path]:
    return {p for p in PACKAGE.glob(pattern) if p.is_file() and "__pycache__" not in p.parts}


def test_every_package_data_pattern_matches_a_file() -> None:
    stale = [pattern for pattern in _patterns() if not _matched(pattern)]
    assert not stale, f"package-data patterns that match nothing: {stale}"


def test_every_data_file_is_declared() -> None:
    declared = set().union(*(_matched(pattern) for pattern in _patterns()))
    files = {p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
             and "__pycache__" not in p.parts}
    missing = sorted(str(p.relative_to(PACKAGE)) for p in files - declared)
    assert not missing, f"files the wheel would leave out: {missing}"


def test_report_templates_are_where_the_loader_looks() -> None:
    # The report's loader reads borrowguard.report/templates: every template it names must ship.
    templates = PACKAGE / "report" / "templates"
    assert (templates / "report.html").is_file()
    assert _matched("report/templates/*.html") == set(templates.glob("*.html"))
