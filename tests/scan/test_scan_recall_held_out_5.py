"""The seventh set (tests/fixtures/logs/real-world-7/): excerpts collected after the rules of 47a7505 were written.

50 excerpts (34 positive, 16 near-miss) from public threads whose sources are in no earlier set: embedding and
reranking services and their clients (TEI's 413s, infinity's 404, LocalAI's 500s, Ollama's gin lines, Open WebUI's
loguru line, Flowise, httpx and openai-python), SGLang (a warm-up killed by a 403, a watchdog timeout, source and
prose near-misses, an embedding server's encode_batch TypeError), vLLM engine deaths (LMCache, ms-swift,
vllm-ascend, the pooling runner), NCCL (a full-width colon, pid-prefixed ranks, ncclCommInitRank, prose titles;
INFO chatter and source as near-misses), the HF tokenizer's "Already borrowed" in prose and quoted shapes, other
PyO3 extensions (polars, DataFusion) and Rust RefCell near-misses. Labelled from their text and committed (ae2f7bb)
before scan ever ran on them, with the rules of 47a7505.

Measured as collected: precision 1.00, recall 0.81 (tp 30, fp 0, fn 7): engine-dead 7/8 (missed: Ollama's runner
'signal: aborted (core dumped)' said in a title), http-error-status 10/15 (missed: openai-python's 'Error code: 502'
with nothing after it, aiohttp's '500, message=...' without its class name in a loguru line, TEI's 413 said in prose
three ways: 'with 413.', 'why cause 413?' / 'hitting 413 from client', and FastChat's 'you get a 404 on'),
nccl-failure 7/8 (missed: 'unhandled system error with NCCL' in a title), pyo3-borrow-elsewhere 3/3,
tokenizer-already-borrowed 3/3; no near-miss produced anything (no false alarm). Confidence as labelled for 25/30.

Then what it showed was learned (so this set is no longer held out), as rules for each class: a child killed by a
fatal signal as Go's os/exec reports it ("signal: aborted", medium; not a shell's "Aborted (core dumped)", which any
program prints); NCCL's result strings ("run with NCCL_DEBUG=INFO for details") and NCCL's errors retold with the
library's name ("unhandled system error with NCCL", "NCCL internal error", medium); a client exception's own str()
without what follows (openai/anthropic "...Error: Error code: 502", aiohttp's "500, message='...'"); a status said in
prose after a verb of answering, only for codes rarely anything else (not 400 or 500), followed by punctuation or a
word about the answer (medium). That gives 1.00 / 1.00 (confidence as labelled for 30/37: the prose statuses are
medium where the labels say high), every other set unchanged.

    python bench/scan_recall.py --set held-out-5 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

HELD_OUT_5 = cases("real-world-7")
AS_COLLECTED = (1.0, 0.81)
NOW = (1.0, 1.0)


def test_the_set_is_big_enough_cited_and_new() -> None:
    earlier = (
        *CASES, *cases("real-world-2"), *cases("real-world-3"), *cases("real-world-4"), *cases("real-world-5"),
        *cases("real-world-6"),
    )
    check_collected_set(HELD_OUT_5, earlier=earlier)


@pytest.mark.parametrize("case", HELD_OUT_5, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.parametrize("case", HELD_OUT_5, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_nothing_it_must_not_produce(case: Case) -> None:
    assert not case.reject & set(found(bulk(case))), case.source


def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(HELD_OUT_5)
    assert round(precision, 2) >= NOW[0] and round(recall, 2) >= NOW[1], (precision, recall)
