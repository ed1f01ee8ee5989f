"""vLLM 0.17.1, the version of the original report: the tiny Qwen2-VL with tools, vLLM's default options
(0.17 has no --renderer-num-workers), unguarded and guarded, checked by `borrowguard verify` (an image-heavy mix, below).

0.17 gives the multimodal processor the same tokenizer, called on the event loop while the renderer thread
encodes: "Failed to acquire tokenizer … Retrying (n/5)" and 400 "Already borrowed". It also answers 400
"Invalid JSON: EOF while parsing" when max_tokens cuts a `tool_choice: "required"` call (random weights never
close one): tokenized fine, so verify raises the tools scenario's max_tokens and never blames the server.

The environment is scripts/vllm_serve_env.py's derived 0.17.1 build (a copy of the 0.19.1 one with the 0.17.1
wheel), in which one CPU-build bug unrelated to tokenizers is fixed: `apply_grammar_bitmask` passes xgrammar's
CPU kernel its indices as a list (as 0.19.1 does), without which EngineCore dies whenever a batch mixes a
structured-output request with a plain one. Its python comes in BORROWGUARD_VLLM_SERVE_017_PYTHON
(`make test-vllm-serve VLLM_SERVE_017=1`); without it the test skips.

Why this mix (measured, issue 23): 0.17 tokenizes every prompt on one renderer thread with truncation on
(max_length from max_tokens or truncate_prompt_tokens), and runs the multimodal processor on the event loop
with truncation off, so an image request collides with the encodes around it. Image weight and requests in
flight decide how often; verify's default mix (image 1 of 5) rarely collides. One unguarded server, verify
invocations one after the other (log lines "Already borrowed" + "Failed to acquire tokenizer" per run; load
average 4-6): default mix -c 16 -d 45s: 2+2; -c 32 -d 45s: 1+1; -c 64 -n 600: 4+2. --mix
text=2,image=3,tools=1,tokenize=2: -c 16 -d 45s: 3+2; -c 32 -d 45s: 10+10; -c 32 -n 600: 7+8; -c 64 -d 45s:
11+6. Big images only (720x1280,1280x720, image=4) are slower to process and collide less: 0+1.

This test (-n 600, that mix, -c 64), both arms, the make target's pytest line run on this file alone,
load average 5-6 from other suites: unguarded FAIL with 16+5, 12+5, 4+6 findings (THRESHOLD 3), guarded PASS
every time (525 of 600 × 200, the 75 tools requests cut at max_tokens 96 and counted as tokenized, 0
tokenizer findings); wall 6:35, 4:27, 4:29 for both arms (each arm: ~50 s server start + 1-3 min verify).
At -c 32 the same mix gave 3+1 once (7:06): too close to the threshold.
"""

from __future__ import annotations

import os

import pytest
from verify_cli import counts_line, verify
from vllm_serve_harness import DISABLED_LINE, INSTALLED_LINE, plugin_lines

VERIFY_N = os.environ.get("BORROWGUARD_VLLM_SERVE_017_VERIFY_N", "600")
# 0.17's race is the multimodal processor (event loop) against the renderer thread's encode: image requests
# must overlap text and /tokenize ones, so the mix weighs images up and more requests are in flight at once.
VERIFY_MIX = ("--mix", "text=2,image=3,tools=1,tokenize=2")
CONCURRENCY = 64
THRESHOLD = 3
TOKENIZER_FINDINGS = ("tokenizer-already-borrowed", "tokenizer-acquire-retry")


@pytest.fixture(scope="module", params=["unguarded", "guarded"])
def server_017(request, start_vllm, serve_python_017):
    with start_vllm(guarded=request.param == "guarded", name=f"v017-{request.param}", python=serve_python_017,
                    renderer_workers=None) as srv:
        yield srv


def test_verify_with_default_options_on_vllm_017(server_017):
    # the arm is what it says: the plugin loaded (a serve environment installed from a clone that moved is not)
    lines = plugin_lines(server_017.log_path.read_text("utf-8", "replace"))
    expected = INSTALLED_LINE if server_017.guarded else DISABLED_LINE
    assert lines and all(expected in line for line in lines), (expected, lines)
    code, doc = verify(server_017, VERIFY_N, *VERIFY_MIX, concurrency=CONCURRENCY)
    summary = doc["levels"][0]["summary"]
    print("\n" + counts_line(f"vllm 0.17.1 {'guarded' if server_017.guarded else 'unguarded'}", doc))
    print("notes:", doc["notes"])
    assert doc["target"]["version"] == "0.17.1"
    assert {"text", "image", "tools", "tokenize"} <= set(summary["scenarios"]), doc["target"]["scenarios"]
    assert summary["requests"] > 60, summary  # a run that did too little proves nothing
    findings = doc["log"]["finding_counts"]
    if server_017.guarded:
        assert (code, doc["verdict"]) == (0, "PASS"), doc["reasons"]
        assert not any(findings.get(k) for k in TOKENIZER_FINDINGS), findings
        # random weights never close a forced call: every tools request is cut, tokenized fine, and said so
        assert any("forced tool call cut" in n for n in doc["notes"]), doc["notes"]
    else:
        assert (code, doc["verdict"]) == (1, "FAIL"), doc["reasons"]
        assert doc["reasons"][0]["code"] == "tokenizer-errors", doc["reasons"]
        assert sum(findings.get(k, 0) for k in TOKENIZER_FINDINGS) >= THRESHOLD, findings
    # our own request shape is never among the reasons
    assert not any("Invalid JSON" in r["message"] for r in doc["reasons"]), doc["reasons"]
