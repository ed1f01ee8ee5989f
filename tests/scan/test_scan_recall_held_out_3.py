"""The fifth set (tests/fixtures/logs/real-world-5/): excerpts collected after real-world-4's lessons were generalized.

45 excerpts (33 positive, 12 near-miss) from public threads whose sources are in no earlier set: tokenizer races
outside vLLM (sentence-transformers behind FastAPI, haystack's REST API, FlagEmbedding and mxbai rerankers, a Flask
service, thread pools), other PyO3 borrow errors (SudachiPy, polars, a PyO3 user's pyclass), Rust RefCell and PyO3
near-misses, engine deaths (SGLang schedulers, TGI shards, vLLM V0 and V1 pooling servers), NCCL, client and server
4xx/5xx, healthy start-up and access lines. Labelled from their text and committed (725f1d8) before scan ever ran on
them, with the rules of fc730f9.

Measured as collected: precision 0.93, recall 0.77 (tp 27, fp 2, fn 8): engine-dead 5/9 (TGI's shard deaths in
its own words, a V0 engine loop's cut traceback), http-error-status 8/9 (httpx's status glued to its reason),
nccl-failure 6/7 (nccl-tests' "NCCL failure file.cu:N"), pyo3-borrow-elsewhere 1/3 (SudachiPy's tokenizer and a PyO3
user's own pyclass taken for the HF tokenizer at low confidence: the two false alarms), tokenizer 7/7. (First
measured as 0.96 / 0.77 with the PyO3 user's excerpt missing its last line, the one with the error: a transcription
error, fixed against the source and measured again with the same rules.)

Then what it showed was learned (so this set is no longer held out), as rules for each class: TGI's launcher
reporting a shard that cannot start and the LauncherError it exits with (ShardFailed / ShardCannotStart); vLLM V0's
engine loop ending with an exception (_raise_exception_on_finish over run_engine_loop); NCCL's result codes as tools
print them ("NCCL failure file.cu:N", ncclSystemError and the other ncclResult_t names); a client's status glued to
its reason; the Rust-backed tokenizers that are not HF's (SudachiPy, Lindera, Vibrato) and a PyO3 user's own
classes (PyRef, Bound<T>, Py<T>) as another library's borrow error. That gives 1.00 / 1.00.

    python bench/scan_recall.py --set held-out-3 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

HELD_OUT_3 = cases("real-world-5")
AS_COLLECTED = (0.93, 0.77)
NOW = (1.0, 1.0)


def test_the_set_is_big_enough_cited_and_new() -> None:
    earlier = (*CASES, *cases("real-world-2"), *cases("real-world-3"), *cases("real-world-4"))
    check_collected_set(HELD_OUT_3, earlier=earlier)


@pytest.mark.parametrize("case", HELD_OUT_3, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.parametrize("case", HELD_OUT_3, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_nothing_it_must_not_produce(case: Case) -> None:
    if NOW == AS_COLLECTED and case.path.name.startswith(("sudachi289", "pyo3_4602")):
        pytest.xfail("as collected: another PyO3 library's borrow error is taken for the HF tokenizer's")
    assert not case.reject & set(found(bulk(case))), case.source


def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(HELD_OUT_3)
    assert round(precision, 2) >= NOW[0] and round(recall, 2) >= NOW[1], (precision, recall)
