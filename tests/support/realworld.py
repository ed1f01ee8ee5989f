"""The reader of tests/fixtures/logs/real-world/: each excerpt with what it must and must not produce.

Shared by tests/scan/test_scan_recall.py (recall and precision), tests/knowledge/test_rules_export.py (the
exported rules on the same lines) and bench/scan_recall.py; the header format is described in the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real-world"


@dataclass
class Case:
    path: Path
    body: str
    expect: dict[str, str] = field(default_factory=dict)
    reject: set[str] = field(default_factory=set)
    server: dict[str, str] = field(default_factory=dict)
    source: str = ""


def read_case(path: Path) -> Case:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = [line[2:] for line in lines if line.startswith("# ")]
    case = Case(path, "".join(line + "\n" for line in lines if not line.startswith("# ")))
    for item in header:
        key, _, value = item.partition(": ")
        if key == "source":
            case.source = value
        elif key == "expect":
            problem, confidence = value.split()
            case.expect[problem] = confidence
        elif key == "reject":
            case.reject.add(value.strip())
        elif key == "server":
            case.server = dict(pair.split("=", 1) for pair in value.split())
    return case
