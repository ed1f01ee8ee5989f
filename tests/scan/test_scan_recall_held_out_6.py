"""The eighth set (tests/fixtures/logs/real-world-8/): excerpts collected after the rules of 1a09f0f were written.

48 excerpts (32 positive, 16 near-miss) from public threads whose sources are in no earlier set: embedding and
reranking services and their clients (Onyx's model server 503, LocalAI and infinity rerank errors, Xinference, gin
500s on /api/embeddings, Gemini's 503 titles, statuses said in prose), vLLM engine deaths (gpustack, vllm-metal,
EngineCore deaths in titles), TGI's launcher (WebserverFailed, "Webserver Crashed"), Ollama runners terminated (titles,
prose, LiteLLM's OllamaError, a goroutine dump), NCCL (ncclSystemError, pynccl errors with Ray's "[repeated 6x across
cluster]", worker lines joined and cut, watchdog and init hangs in titles; INFO/WARN chatter as near-misses), the HF
tokenizer's "Already borrowed" in titles and a fix's description, another PyO3 extension (junction-client), and
tokenizer races or Rust RefCell panics with no borrow error as near-misses. Labelled from their text and committed
(b4de205) before scan ever ran on them, with the rules of 1a09f0f.

Measured as collected: precision 0.93, recall 0.74 (tp 25, fp 2, fn 9): engine-dead 9/12 (missed: dots.ocr's
"EngineCore failed to start" title and "EnginCore failed error" prose, Ollama's "Llama runner Terminated" title,
vLLM's "EngineCore crashes" title, the present tense 1a09f0f left out), http-error-status 6/11 (missed: Gemini's
"503. The model is overloaded." and "503 errors" titles, "nitro yields 500" / "The server returns 500" at the end of
a line, infinity's "InternalServerError: ..." message without a code, vLLM's "Internal Server Error" said in a title
and prose), nccl-failure 7/7 with one false alarm (low: the libibverbs WARN among NCCL INFO lines), pyo3-borrow-
elsewhere 0/1 (junction-client's "Already Borrowed exceptions from Pyo3" was read as the tokenizer's, low: a false
alarm too), tokenizer-already-borrowed 3/3; confidence as labelled for 17/25; the read paths agree on all 48. A
near-miss produced what it rejects (nccl857's libibverbs WARN), so the held-out-5 test that no excerpt produces
what it must not is not here as collected.

Then what it showed was learned (so this set is no longer held out), as rules for each class: an engine's death in
the present ("EngineCore crashes"), told in prose (medium), with a line citing a thread ("owner/repo#N (issue title,
...)") excluded as a quotation; Ollama's runner terminated in any case ("Llama runner Terminated", medium); "Pyo3"
spelled so among PyO3's names (the context that says a borrow error is not the tokenizer's); a status said without
its usual frame (medium): the 500/503 reason phrase alone ("Internal Server Error", "Service Unavailable"), a status
class named without a code ("InternalServerError: ...", "ServiceUnavailableError"), a rare code counted as it
happens ("Increased number of 503 errors"; not "we retry on 429 and 503 responses") or followed by the overload it
reports ("503. The model is overloaded."). That gives 0.97 / 0.94 (tp 32, fp 1, fn 2; confidence as labelled for
23/32). Left as they are: dots.ocr's "EngineCore failed to start" (tried: vLLM's own record says it before the
cause it dies of, a CUDA OOM that is the finding, and an exclusion of vLLM's records is not seen by the line
exports), cortex.cpp's "The server returns 500" at a line's end (400 and 500 in prose count rows too, and the
exports have no end-of-line anchor) and the libibverbs near-miss's low "stalled at NCCL init" (the excerpt does end
in NCCL's init, and the thread is about a hang: the label is arguable, the heuristic is not changed for it). Every
other set unchanged file by file, but for one confidence in held-out-5 that now agrees with its label (DataFusion's
PR text: "Pyo3", high; 31/37).

    python bench/scan_recall.py --set held-out-6 --verbose
"""

from __future__ import annotations

import pytest
from test_scan_recall import CASES, Case, bulk, cases, check_collected_set, found, line_by_line, score

HELD_OUT_6 = cases("real-world-8")
AS_COLLECTED = (0.93, 0.74)
NOW = (0.97, 0.94)


def test_the_set_is_big_enough_cited_and_new() -> None:
    earlier = (
        *CASES, *cases("real-world-2"), *cases("real-world-3"), *cases("real-world-4"), *cases("real-world-5"),
        *cases("real-world-6"), *cases("real-world-7"),
    )
    check_collected_set(HELD_OUT_6, earlier=earlier)


@pytest.mark.parametrize("case", HELD_OUT_6, ids=lambda c: f"{c.path.parent.name}/{c.path.name}")
def test_both_read_paths_agree(case: Case) -> None:
    assert found(bulk(case)) == found(line_by_line(case))


def test_precision_and_recall_do_not_fall_below_what_was_measured() -> None:
    precision, recall, *_ = score(HELD_OUT_6)
    assert round(precision, 2) >= NOW[0] and round(recall, 2) >= NOW[1], (precision, recall)
