"""The benches' shared contract: goals printed, `--check` exits 1 below a goal; serve.py interleaves guard off/on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from goals import Goal, finish  # noqa: E402  (bench/ is not a package)

CHECKED = ["serve.py", "load.py", "scan.py", "fleet.py"]


def test_finish_reports_and_exits_0_without_check(capsys):
    assert finish([Goal("ratio >= 0.8", False, "0.50")], check=False) == 0
    assert "goal ratio >= 0.8: 0.50 — NOT met" in capsys.readouterr().out


def test_check_exits_1_when_a_goal_is_missed_or_nothing_was_measured(capsys):
    met, missed = Goal("a", True, "1.0"), Goal("b", False, "0.1")
    assert finish([met], check=True) == 0
    assert finish([met, missed], check=True) == 1
    assert "1 goal(s) missed: b" in capsys.readouterr().err
    assert finish([], check=True) == 1


@pytest.mark.slow
@pytest.mark.parametrize("script", CHECKED)
def test_every_bench_offers_check(script):
    proc = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr
    assert "--check" in proc.stdout


def test_serve_interleaves_guard_off_and_on():
    from serve import PATHS, schedule

    order = schedule(3)
    assert len(order) == 3 * 2 * len(PATHS)
    for r in range(3):  # each round measures both sides on each path, back to back
        one_round = order[r * 4:(r + 1) * 4]
        assert sorted(one_round) == sorted((g, p) for g in (False, True) for p in PATHS)
        assert one_round[0][0] == one_round[1][0] ^ True
    assert order[0][0] != order[4][0]  # who goes first flips every round
