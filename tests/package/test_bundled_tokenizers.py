"""The shipped tokenizers are what scripts/build_tokenizers.py produces, and load offline on this stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from borrowguard.data import BUNDLED, CHATML, WORDPIECE, tokenizer_path
from support.corpus import corpus

ROOT = Path(__file__).resolve().parents[2]
PROBE = 'Hello world, the model said 你好世界 <|im_start|>user\n🙂 [CLS] def f(x): return {"a": 1}'


def _model_fingerprint(path: Path) -> dict:
    """What training decides (vocab, merges, added tokens), independent of how a version serialises it."""
    data = json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))
    model = data["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    added = [(t["id"], t["content"], t["special"]) for t in data["added_tokens"]]
    return {"vocab": model["vocab"], "merges": merges, "added": added}


def test_corpus_is_deterministic() -> None:
    assert list(corpus(seed=5, lines=300)) == list(corpus(seed=5, lines=300))
    assert list(corpus(seed=5, lines=300)) != list(corpus(seed=6, lines=300))


@pytest.mark.slow
def test_shipped_files_equal_what_the_script_produces(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_tokenizers.py"), "--out", str(tmp_path)],
        check=True,
        timeout=300,
    )
    for name in BUNDLED:
        assert _model_fingerprint(tmp_path / name) == _model_fingerprint(tokenizer_path(name)), name
        for extra in ("tokenizer_config.json", "vocab.txt", "merges.txt", "vocab.json"):
            shipped = tokenizer_path(name) / extra
            if shipped.exists():
                assert (tmp_path / name / extra).read_bytes() == shipped.read_bytes(), f"{name}/{extra}"
        built = Tokenizer.from_file(str(tmp_path / name / "tokenizer.json"))
        ours = Tokenizer.from_file(str(tokenizer_path(name) / "tokenizer.json"))
        assert built.encode(PROBE, "pair").ids == ours.encode(PROBE, "pair").ids


@pytest.mark.parametrize("name", BUNDLED)
def test_loads_offline_with_autotokenizer(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path(name)))
    raw = Tokenizer.from_file(str(tokenizer_path(name) / "tokenizer.json"))
    assert tok.is_fast
    ours = tok(PROBE, return_offsets_mapping=True)
    theirs = raw.encode(PROBE)
    assert ours["input_ids"] == theirs.ids
    assert [tuple(o) for o in ours["offset_mapping"]] == theirs.offsets


def test_chatml_tokens_and_template() -> None:
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path(CHATML)))
    assert 8000 <= len(tok) <= 32000
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
    for special in (
        "<|im_start|>",
        "<|vision_start|>",
        "<|image_pad|>",
        "<|vision_end|>",
        "<tool_call>",
        "</tool_call>",
    ):
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1, special
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:"}},
                {"type": "text", "text": "What?"},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "content": "sunny"},
    ]
    prompt = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "<|vision_start|><|image_pad|><|vision_end|>What?" in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsunny\n</tool_response>" in prompt
    assert '"name": "get_weather"' in prompt.split("<tools>\n", 1)[1].split("\n</tools>")[0]
    assert prompt.endswith("<|im_start|>assistant\n")


def test_wordpiece_pairs_get_cls_and_sep() -> None:
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path(WORDPIECE)))
    out = tok("first part", "second part")
    ids = out["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert ids.count(tok.sep_token_id) == 2
    assert out["token_type_ids"][-1] == 1 and out["token_type_ids"][0] == 0


def test_chatml_template_takes_content_parts_in_every_role() -> None:
    """vLLM passes content in the "openai" form (a list of parts), system messages included."""
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path(CHATML)))
    as_parts = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "tool", "content": [{"type": "text", "text": "42"}]},
    ]
    as_strings = [{**m, "content": m["content"][0]["text"]} for m in as_parts]
    for tools in (None, [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]):
        parts = tok.apply_chat_template(as_parts, tools=tools, tokenize=False)
        assert parts == tok.apply_chat_template(as_strings, tools=tools, tokenize=False)
        assert "Be brief." in parts and "<tool_response>\n42\n</tool_response>" in parts
