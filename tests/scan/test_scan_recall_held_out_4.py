"""The sixth set (tests/fixtures/logs/real-world-6/): excerpts collected after the rules for the classes were written.

43 excerpts (33 positive, 10 near-miss) from public threads whose sources are in no earlier set: llama.cpp's
GGML_ASSERT aborts, Ollama's runner deaths and 500s, SGLang (sigquit, scheduler and TokenizerManager exceptions,
embedding servers), TGI shards, NCCL unhandled system errors, 4xx/5xx of embedding services and clients (TEI, Azure,
openai, Weaviate's modules), "Already borrowed" from a FastAPI server, a Sentry issue and spaCy's Japanese tokenizer,
and near-misses (Rust RefCell panics and source, healthy llamafile and TGI lines, SGLang and GGML source and prose).
Labelled from their text and committed (6e4f62d) before scan ever ran on them, with the rules of 7add21a.

Measured as collected: precision 0.94, recall 0.80 (tp 33, fp 2, fn 8): engine-dead 17/21 (missed: a GGML_ASSERT
said in prose, Ollama's newer 'llama-server process has terminated', SGLang's 'sigquit ... proces.' typo printed by
logging's error handler, SGLang's TokenizerManager exception; false alarm: SGLang's source quoting the log call),
http-error-status 9/12 (missed: Azure's 'Error 413:', Weaviate's 'fail with status 500' twice), nccl-failure 5/5,
pyo3-borrow-elsewhere 0/1 (spaCy's Japanese tokenizer taken for the HF tokenizer at low confidence: the other false
alarm), tokenizer 2/2.

Then what it showed was learned (so this set is no longer held out), as rules for each class: Ollama's runner under
its newer name (llama-server process) and 'llama runner terminated'; SGLang's sigquit in its own misspelling and
its TokenizerManager's exception, not when a logger call quotes it in source; a GGML_ASSERT named without its
condition (medium); 'Error 413:' and 'with status 500' as statuses; spaCy's Japanese tokenizer (SudachiPy) as
another library's borrow error. That gives 1.00 / 1.00.

    python bench/scan_recall.py --set held-out-4 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

HELD_OUT_4 = cases("real-world-6")
AS_COLLECTED = (0.94, 0.80)
NOW = (1.0, 1.0)
KNOWN_FALSE = ("sglang4618", "spacy13733")  # as collected: see the module's docstring


def test_the_set_is_big_enough_cited_and_new() -> None:
    earlier = (*CASES, *cases("real-world-2"), *cases("real-world-3"), *cases("real-world-4"), *cases("real-world-5"))
    check_collected_set(HELD_OUT_4, earlier=earlier)


@pytest.mark.parametrize("case", HELD_OUT_4, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


@pytest.mark.parametrize("case", HELD_OUT_4, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_nothing_it_must_not_produce(case: Case) -> None:
    if NOW == AS_COLLECTED and case.path.name.startswith(KNOWN_FALSE):
        pytest.xfail("as collected: source quoting a log call, another tokenizer's borrow error")
    assert not case.reject & set(found(bulk(case))), case.source


def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(HELD_OUT_4)
    assert round(precision, 2) >= NOW[0] and round(recall, 2) >= NOW[1], (precision, recall)
