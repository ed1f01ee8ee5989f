"""The fourth set (tests/fixtures/logs/real-world-4/): excerpts collected after real-world-3's lessons.

43 excerpts from public threads whose sources are in no earlier set: embedding, reranking and NER services
(FastAPI, Flask, sentence-transformers, spaCy, flair, KeyBERT, TEI, vLLM's /embeddings, /rerank and /score),
SGLang schedulers and NCCL, MLX and MAX servers, PyO3 borrow errors and panics of other extensions (torchft,
granian, watchfiles, rust-numpy), Rust RefCell panics, client-side 4xx/5xx. Labelled from their text and
committed (3eaab70) before scan ever ran on them, with the rules of 810748b.

Measured as collected: precision 0.93, recall 0.76 (tp 25, fp 2, fn 8). Then what it showed was learned (so
this set is no longer held out): a whole traceback whose innermost call is no tokenizer's is another
extension's borrow error (named by that frame's package); granian is such an extension; EngineDeadError's
message passed on without its name, an early SGLang's "Exception in ControllerSingle", an interpreter abort;
clients' "status_code: 500", an error object's "code": 500 and gin's access lines. And a bug: a source line
outside a traceback counted as the tokenizer's context on the line path but not on the fast path. That
gives 1.00 / 1.00.

    python bench/scan_recall.py --set held-out-2 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

HELD_OUT_2 = cases("real-world-4")
AS_COLLECTED = (0.93, 0.76)
NOW = (1.0, 1.0)


def test_the_set_is_big_enough_cited_and_new() -> None:
    check_collected_set(HELD_OUT_2, earlier=(*CASES, *cases("real-world-2"), *cases("real-world-3")))


@pytest.mark.parametrize("case", HELD_OUT_2, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.parametrize("case", HELD_OUT_2, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_nothing_it_must_not_produce(case: Case) -> None:
    assert not case.reject & set(found(bulk(case))), case.source


def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(HELD_OUT_2)
    assert round(precision, 2) >= NOW[0] and round(recall, 2) >= NOW[1], (precision, recall)
