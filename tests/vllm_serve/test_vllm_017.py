"""vLLM 0.17.1, the version of the original report: the tiny Qwen2-VL with tools, vLLM's default options
(0.17 has no --renderer-num-workers), unguarded and guarded, checked by `borrowguard verify`'s defaults.

0.17 gives the multimodal processor the same tokenizer, called on the event loop while the renderer thread
encodes: "Failed to acquire tokenizer … Retrying (n/5)" and 400 "Already borrowed". It also answers 400
"Invalid JSON: EOF while parsing" when max_tokens cuts a `tool_choice: "required"` call (random weights never
close one): tokenized fine, so verify raises the tools scenario's max_tokens and never blames the server.

The environment is scripts/vllm_serve_env.py's derived 0.17.1 build (a copy of the 0.19.1 one with the 0.17.1
wheel), in which one CPU-build bug unrelated to tokenizers is fixed: `apply_grammar_bitmask` passes xgrammar's
CPU kernel its indices as a list (as 0.19.1 does), without which EngineCore dies whenever a batch mixes a
structured-output request with a plain one. Its python comes in BORROWGUARD_VLLM_SERVE_017_PYTHON
(`make test-vllm-serve VLLM_SERVE_017=1`); without it the test skips.

Measured on a loaded 2-core machine (issue 23, -n 300 at concurrency 16, 8-11 min per run of both arms): the
guarded arm PASSes (240 of 300 × 200, the 60 tools requests all cut at max_tokens 96 and counted as tokenized,
no timeout); the unguarded arm is not yet green: 0 and 2 "Already borrowed" in two runs, below THRESHOLD 3
(the issue's first measurement saw 20 in 60 s). Opt-in until the race is provoked more often.
"""

from __future__ import annotations

import os

import pytest
from verify_cli import counts_line, verify
from vllm_serve_harness import DISABLED_LINE, INSTALLED_LINE, plugin_lines

VERIFY_N = os.environ.get("BORROWGUARD_VLLM_SERVE_017_VERIFY_N", "300")
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
    code, doc = verify(server_017, VERIFY_N)
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
