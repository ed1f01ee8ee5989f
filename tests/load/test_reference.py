"""The serial reference (load/reference.py) and what the metrics and the verdict do with it, without a server:
answers under load compared with the same request sent alone, vectors within a tolerance, the checks' counts,
and the empty 500s of vLLM's bad_words path tied to their requests."""

from __future__ import annotations

import math

from borrowguard.load.client import Outcome, pooled_vectors
from borrowguard.load.faults import Fault
from borrowguard.load.metrics import LoadMetrics
from borrowguard.load.reference import VECTOR_TOLERANCE, Reference, distance
from borrowguard.load.summary import Series
from borrowguard.verify.result import CheckName, CheckState, LevelResult, ReasonCode, Verdict
from borrowguard.verify.verdict import LevelFacts, LogState, RunFacts, decide, level_reasons

VEC = ((0.6, 0.8, 0.0), (0.0, 1.0, 0.0))


def _ok(key: str | None, tokens: int | None = None, vectors=None, scenario: str = "embed") -> Outcome:
    return Outcome(scenario, key, None, start=0.1, latency=0.01, status=200, prompt_tokens=tokens,
                   vectors=vectors)


def _run(metrics: LoadMetrics, **kw):
    summary = metrics.summary(1.0)
    facts = LevelFacts(concurrency=8, summary=summary, tokenizer_counts={}, first_tokenizer_line=None, death=None,
                       interrupted=False, max_error_rate=0.0)
    level = LevelResult(8, 1.0, summary, Series(1.0, ()), level_reasons(facts))
    return decide(RunFacts(levels=[level], could_not_run=None, interrupted=False, death=None,
                           tokenizer_counts_total={}, tokenizer_reported=0, first_tokenizer_line=None,
                           log=LogState(given=True, lines=50), health_watched=True, health_failed=False,
                           health_polls=kw.get("polls", 3)))


def _feed(metrics: LoadMetrics, outcomes) -> LoadMetrics:
    for outcome in outcomes:
        metrics.started(0.0)
        metrics.finished(outcome)
    return metrics


def test_pooled_vectors_reads_every_pooling_answer_in_input_order() -> None:
    assert pooled_vectors([{"index": 0, "embedding": [1, 2.5]}, {"index": 1, "embedding": [3, 4]}]) == (
        (1.0, 2.5), (3.0, 4.0))
    # rerank answers come sorted by relevance: back in input order by `index`
    assert pooled_vectors([{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]) == (
        (0.1,), (0.9,))
    assert pooled_vectors([{"index": 0, "data": [[1, 2], [3, 4]]}]) == ((1.0, 2.0, 3.0, 4.0),)
    assert pooled_vectors([{"index": 0, "score": 0.25}]) == ((0.25,),)
    # anything else is nothing to compare: never a crash, never a made-up vector
    for hostile in ([{"embedding": "abc"}], [{"embedding": [1, True]}], [{"embedding": [float("nan")]}],
                    [{"object": "embedding"}], ["x"], [{"embedding": [[[[[[1]]]]]]}]):
        assert pooled_vectors(hostile) is None, hostile
    assert pooled_vectors([{"embedding": [0.5] * (1 << 16)}, {"embedding": [0.5]}]) is None  # bounded


def test_distance_is_relative_and_shape_aware() -> None:
    assert distance(VEC, VEC) == 0.0
    near = ((0.6 + 1e-5, 0.8, 0.0), (0.0, 1.0, 0.0))
    assert distance(near, VEC) < VECTOR_TOLERANCE
    far = ((0.8, 0.6, 0.0), (0.0, 1.0, 0.0))  # another request's truncation: a different vector
    assert distance(far, VEC) > VECTOR_TOLERANCE
    assert math.isinf(distance(VEC[:1], VEC)) and math.isinf(distance(((1.0,),), ((1.0, 2.0),)))


def test_a_consistently_wrong_answer_under_load_fails_against_the_serial_reference() -> None:
    refs = {"text/plain": Reference("text/plain", 120, None)}
    wrong = _feed(LoadMetrics(["text"], refs), [_ok("text/plain", 113, scenario="text") for _ in range(6)])
    stats = wrong.summary(1.0).repeats["text/plain"]
    assert stats.consistent and not stats.matches_reference and stats.reference == 120
    verdict, reasons, checks, _ = _run(wrong)
    assert verdict is Verdict.FAIL
    (reason,) = reasons
    assert reason.code is ReasonCode.PROMPT_TOKENS_MISMATCH and "sent alone before the load it got 120" in reason.message
    assert {c.name: c.state for c in checks}[CheckName.PROMPT_TOKENS] is CheckState.FAILED
    # without the reference, the same answers only agree with each other: no failure (what issue 23 found)
    alone = _feed(LoadMetrics(["text"]), [_ok("text/plain", 113, scenario="text") for _ in range(6)])
    assert _run(alone)[0] is Verdict.PASS


def test_vectors_beyond_the_tolerance_fail_and_the_checks_state_their_counts() -> None:
    refs = {"embed/batch": Reference("embed/batch", 40, VEC)}
    far = ((0.8, 0.6, 0.0), (0.0, 1.0, 0.0))
    bad = _feed(LoadMetrics(["embed"], refs), [_ok("embed/batch", 40, VEC), _ok("embed/batch", 40, far)])
    verdict, reasons, checks, _ = _run(bad)
    assert verdict is Verdict.FAIL and [r.code for r in reasons] == [ReasonCode.VECTOR_MISMATCH]
    assert "1 of 2 answers" in reasons[0].message
    assert {c.name: c.state for c in checks}[CheckName.VECTORS] is CheckState.FAILED

    good = _feed(LoadMetrics(["embed"], refs), [_ok("embed/batch", 40, VEC) for _ in range(5)])
    verdict, reasons, checks, _ = _run(good, polls=7)
    assert verdict is Verdict.PASS, reasons
    said = {c.name: c.detail for c in checks if c.state is CheckState.PASSED}
    assert said[CheckName.VECTORS] == f"5 vectors of identical requests within {VECTOR_TOLERANCE:g} of their reference"
    assert said[CheckName.PROMPT_TOKENS].startswith("5 answers to 1 identical requests agreed")
    assert "(5 of them compared with the same request sent alone)" in said[CheckName.PROMPT_TOKENS]
    assert said[CheckName.REQUESTS] == "5 of 5 valid requests got a 2xx"
    assert said[CheckName.HEALTH].endswith("health answered 7 polls")


def test_a_check_that_compared_nothing_is_not_claimed() -> None:
    # answers without usage and without vectors: nothing compared, so no consistency and no vectors check
    metrics = _feed(LoadMetrics(["text"]), [_ok("text/plain", None, scenario="text") for _ in range(4)])
    verdict, _, checks, _ = _run(metrics, polls=0)
    states = {c.name: c.state for c in checks}
    assert verdict is Verdict.PASS
    assert states[CheckName.PROMPT_TOKENS] is CheckState.NOT_RUN and CheckName.VECTORS not in states
    assert states[CheckName.HEALTH] is CheckState.NOT_RUN  # never polled: not claimed either
    # one answer alone, without a reference, compares nothing either
    single = _feed(LoadMetrics(["text"]), [_ok("text/plain", 50, scenario="text")])
    assert {c.name: c.state for c in _run(single)[2]}[CheckName.PROMPT_TOKENS] is CheckState.NOT_RUN


def test_empty_500s_are_tied_to_bad_words_requests_with_the_way_to_see_the_error() -> None:
    metrics = LoadMetrics(["text"])
    outcomes = [_ok(None, scenario="text")] * 3 + [
        Outcome("text", None, None, start=0.1, status=500, message="", fault=Fault.SERVER, bad_words=True),
        Outcome("text", None, None, start=0.1, status=500, message="", fault=Fault.SERVER, bad_words=True),
        Outcome("text", None, None, start=0.1, status=500, message="", fault=Fault.SERVER, bad_words=False),
    ]
    summary = _feed(metrics, outcomes).summary(1.0)
    assert (summary.empty_5xx, summary.empty_5xx_bad_words) == (3, 2)
    verdict, reasons, _, _ = _run(metrics)
    assert verdict is Verdict.FAIL
    (reason,) = reasons
    assert "3 5xx answer(s) had an empty message, 2 of them on requests with bad_words" in reason.message
    assert "--enable-log-requests" in reason.message


def test_a_request_cut_by_the_drain_is_unfinished_only_when_no_slower_than_the_answers() -> None:
    metrics = LoadMetrics(["text"])
    assert not metrics.cut_at_drain(0.5)  # nothing answered in the level: a timeout (a stalled server)
    metrics.started(0.0)
    metrics.finished(Outcome("text", None, None, start=0.0, latency=2.0, status=400, message="no"))
    metrics.started(0.0)
    assert metrics.cut_at_drain(5.9)  # a busy server's slow answer: neither answered nor failed
    metrics.started(0.0)
    assert not metrics.cut_at_drain(6.1)  # far slower than any answer: the server's timeout
    summary = metrics.summary(1.0)
    assert (summary.unfinished, summary.slowest_answer, metrics.inflight) == (1, 2.0, 1)
