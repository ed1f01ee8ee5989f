"""A real vLLM 0.19.1 embedding server (`vllm serve TINY_QWEN2 --runner pooling --convert embed`, 4 renderer
workers), unguarded and guarded, checked by `borrowguard verify` with its default options.

On a pooling server chat and completions do not exist (404): verify's preflight finds what is served —
/v1/embeddings, /pooling, /score, /rerank, /v1/rerank, /tokenize (not /classify) — and races those with the
shapes that collide (load/pooling.py). Unguarded, two renderer threads tokenize with different truncation
(`truncate_prompt_tokens` N, -1 = the model's maximum, none) and vLLM answers 500 "Already borrowed".

Measured here (30 s at concurrency 16, 2 busy cores, see the report of issue 23): unguarded verify runs saw
12 and 92 tokenizer-caused failures (the stdlib hammer of support/embed_load.py: 36 of 380), guarded 0 of 324
and 0 of 172. THRESHOLD asks for a few, never a single hit.
"""

from __future__ import annotations

import os

import pytest
from verify_cli import counts_line, verify
from vllm_serve_harness import DISABLED_LINE, INSTALLED_LINE, POOLING_ARGS, plugin_lines

VERIFY_N = os.environ.get("BORROWGUARD_VLLM_SERVE_POOLING_VERIFY_N", "200")
THRESHOLD = 3
SERVED = {"/v1/embeddings", "/pooling", "/score", "/rerank", "/v1/rerank", "/tokenize", "/detokenize"}


@pytest.fixture(scope="module", params=["unguarded", "guarded"])
def pooling_server(request, start_vllm, tiny_text):
    with start_vllm(guarded=request.param == "guarded", name=f"pooling-{request.param}", model=tiny_text,
                    multimodal=False, tool_parser=False, extra_args=POOLING_ARGS) as srv:
        yield srv


def test_verify_with_default_options_on_an_embedding_server(pooling_server):
    # the arm is what it says: the plugin loaded (a serve environment installed from a clone that moved is not)
    lines = plugin_lines(pooling_server.log_path.read_text("utf-8", "replace"))
    expected = INSTALLED_LINE if pooling_server.guarded else DISABLED_LINE
    assert lines and all(expected in line for line in lines), (expected, lines)
    code, doc = verify(pooling_server, VERIFY_N)
    summary = doc["levels"][0]["summary"]
    print("\n" + counts_line(f"vllm 0.19.1 pooling {'guarded' if pooling_server.guarded else 'unguarded'}", doc))
    endpoints = doc["target"]["endpoints"]
    assert {p for p, ok in endpoints.items() if ok} == SERVED, endpoints
    assert not endpoints["/v1/chat/completions"] and not endpoints["/classify"], endpoints
    # what ran: the pooling scenarios and /tokenize; the chat ones were skipped as not served
    assert set(summary["scenarios"]) == {"tokenize", "embed", "rerank", "score", "pooling"}, doc["target"]
    assert all(doc["target"]["scenarios"][s].startswith("skipped: not served") for s in ("text", "image", "tools"))
    assert "workload" not in summary["errors_by_fault"], summary["errors_by_status"]
    assert summary["requests"] > 60, summary  # a run that did too little proves nothing
    if pooling_server.guarded:
        assert (code, doc["verdict"]) == (0, "PASS"), doc["reasons"]
        assert summary["ok"] == summary["requests"]
        # identical requests' counts and vectors equal what the same request got alone, before the load
        checks = {c["name"]: c["state"] for c in doc["checks"]}
        assert checks["prompt-tokens"] == checks["vectors"] == "passed", doc["checks"]
    else:
        assert (code, doc["verdict"]) == (1, "FAIL"), doc["reasons"]
        assert doc["reasons"][0]["code"] == "tokenizer-errors", doc["reasons"]
        assert summary["errors_by_fault"].get("tokenizer", 0) >= THRESHOLD, summary["errors_by_fault"]
        assert doc["log"]["finding_counts"].get("tokenizer-already-borrowed", 0) >= THRESHOLD
