"""What a PASS may claim (verify/soundness.py)."""

from __future__ import annotations

from borrowguard.verify.soundness import exercise, incomplete_because


def test_only_concurrent_successes_count_as_exercised() -> None:
    ran = exercise([(1, {"embed": 50}), (16, {"embed": 1, "rerank": 30, "text": 0})])
    assert ran.scenarios == ["rerank"]
    assert "rerank (30 answered)" in ran.describe()


def test_nothing_exercised_or_an_asked_for_log_check_that_did_not_run_is_incomplete() -> None:
    nothing = exercise([(16, {"text": 0})])
    why = incomplete_because(nothing, ["/v1/models"], log_asked=False, log_ran=False)
    assert len(why) == 1 and "/v1/models" in why[0]
    ran = exercise([(16, {"embed": 40})])
    assert incomplete_because(ran, ["/v1/embeddings"], log_asked=False, log_ran=False) == []
    assert incomplete_because(ran, ["/v1/embeddings"], log_asked=True, log_ran=True) == []
    why = incomplete_because(ran, [], log_asked=True, log_ran=False, log_detail="cmd exited 127")
    assert why == ["the log check asked for (--log / --log-cmd) could not run: cmd exited 127"]
