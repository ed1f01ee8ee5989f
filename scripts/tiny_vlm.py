#!/usr/bin/env python3
"""Build (once) and cache a tiny random-weight Qwen2-VL model that a real `vllm serve` can load on a CPU.

    PY=$(python3.11 scripts/vllm_serve_env.py) && "$PY" scripts/tiny_vlm.py   # prints the model dir last

Nothing comes from a model hub. The model is Qwen2VLForConditionalGeneration with random weights (seeded):
two decoder layers of hidden size 128 with head_dim 64 (vLLM's CPU attention supports 64, not 16) and a
two-block vision tower. Its tokenizer is the repository's bundled ChatML byte-level BPE
(src/borrowguard/data/tokenizers/chatml-bpe: <|im_start|>/<|im_end|>, <|vision_start|>, <|vision_end|>,
<|image_pad|>, <tool_call>, </tool_call>, and a Hermes-style chat template that renders image parts as
<|vision_start|><|image_pad|><|vision_end|> and supports tools, so vLLM's `hermes` tool parser works) plus
the remaining Qwen2-VL special tokens. `model_max_length` equals MAX_MODEL_LEN, the context the tests
serve with: chat requests with max_tokens=1 then tokenize with max_length == model_max_length, which puts
them in a different AsyncMicrobatchTokenizer queue than any other request (the race needs both queues).

The model lives in ${BORROWGUARD_VLLM_CACHE:-~/.cache/borrowguard}/tiny-qwen2vl-KEY, KEY being a hash of
this script and the bundled tokenizer; a marker written last makes a half-written directory rebuild.
Run it with the environment's python (it needs torch and transformers). `--text-only` builds the same
model without vision (Qwen2ForCausalLM, tiny-qwen2-KEY): a server that refuses images.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOKENIZER_SRC = REPO / "src" / "borrowguard" / "data" / "tokenizers" / "chatml-bpe"
CACHE = Path(os.environ.get("BORROWGUARD_VLLM_CACHE", Path.home() / ".cache" / "borrowguard"))
SEED = 20261201
MAX_MODEL_LEN = 2048
EXTRA_SPECIALS = ["<|video_pad|>", "<|vision_pad|>"]
# Small images: at most 64 merged vision tokens per image, so the vision tower stays cheap on 2 cores.
MIN_PIXELS = 28 * 28 * 4
MAX_PIXELS = 28 * 28 * 64
DEFAULT_MAX_TOKENS = 16
MARKER_NAME = ".borrowguard-ready.json"


def log(msg: str) -> None:
    print(f"[tiny-vlm] {msg}", file=sys.stderr, flush=True)


def build_key() -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    for f in sorted(TOKENIZER_SRC.iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def model_dir(text_only: bool = False) -> Path:
    return CACHE / f"{'tiny-qwen2' if text_only else 'tiny-qwen2vl'}-{build_key()}"


def build(out: Path, text_only: bool = False) -> None:
    import torch
    import transformers
    from transformers import (
        AutoTokenizer,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
    )

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    tmp.mkdir(parents=True)

    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_SRC))
    tok.add_special_tokens({"additional_special_tokens": EXTRA_SPECIALS}, replace_additional_special_tokens=False)
    tok.model_max_length = MAX_MODEL_LEN
    ids = {t: tok.convert_tokens_to_ids(t) for t in
           ("<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")}
    vocab = 64 * ((len(tok) + 63) // 64)

    head_dim = 64
    text = dict(
        vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=MAX_MODEL_LEN,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
        # mrope sections are in units of rotary pairs: they sum to head_dim // 2.
        rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]},
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
    )
    vision = dict(depth=2, embed_dim=128, num_heads=2, mlp_ratio=2, hidden_size=128, in_channels=3,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    assert text["hidden_size"] // text["num_attention_heads"] == head_dim
    if text_only:  # the same tokenizer and text stack, no vision: a server that refuses images
        text.pop("rope_scaling")
        config = Qwen2Config(**text)
    else:
        config = Qwen2VLConfig(
            text_config=text, vision_config=vision, **text,
            image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        )
    config.torch_dtype = torch.float32

    torch.manual_seed(SEED)
    model_class = Qwen2ForCausalLM if text_only else Qwen2VLForConditionalGeneration
    model = model_class(config).to(torch.float32).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    # vLLM takes max_new_tokens as the default max_tokens: requests that give none (which tokenize with
    # max_length = max_model_len + 1) then still finish quickly on random weights that never emit EOS.
    model.generation_config.max_new_tokens = DEFAULT_MAX_TOKENS
    model.save_pretrained(str(tmp), safe_serialization=True)

    if text_only:
        tok.save_pretrained(str(tmp))
        return _finish(tmp, out, tok, ids, vocab, torch.__version__, transformers.__version__)
    image_processor = Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                            patch_size=14, merge_size=2, temporal_patch_size=2)
    try:
        from transformers import Qwen2VLVideoProcessor

        video_processor = Qwen2VLVideoProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    except ImportError:  # pragma: no cover - older transformers
        video_processor = None
    kwargs = {"video_processor": video_processor} if video_processor is not None else {}
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tok,
                                 chat_template=tok.chat_template, **kwargs)
    processor.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))  # after the processor, so that tokenizer_config.json is the tokenizer's own
    _finish(tmp, out, tok, ids, vocab, torch.__version__, transformers.__version__)


def _finish(tmp: Path, out: Path, tok: object, ids: dict, vocab: int, torch_v: str, tf_v: str) -> None:
    cfg = json.loads((tmp / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert cfg["model_max_length"] == MAX_MODEL_LEN, cfg["model_max_length"]
    marker = {"key": build_key(), "seed": SEED, "max_model_len": MAX_MODEL_LEN, "vocab_size": vocab,
              "tokens": ids, "torch": torch_v, "transformers": tf_v}
    (tmp / MARKER_NAME).write_text(json.dumps(marker, indent=1), encoding="utf-8")
    tmp.rename(out)
    log(f"built {out} ({sum(f.stat().st_size for f in out.iterdir()) / 2**20:.1f} MiB)")


def main(argv: list[str]) -> int:
    text_only = "--text-only" in argv
    out = model_dir(text_only)
    if (out / MARKER_NAME).exists():
        log(f"reusing {out}")
    else:
        build(out, text_only)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
