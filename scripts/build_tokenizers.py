#!/usr/bin/env python3
"""Regenerate the bundled tokenizers in src/borrowguard/data/tokenizers, reproducibly and offline.

    python scripts/build_tokenizers.py [--out DIR]

Both tokenizers are trained on a synthetic corpus drawn from a seeded random.Random (SEED below), so no
text has to be downloaded and every run produces the same vocabulary and merges. The corpus mixes
English-like prose, pseudo-words with a Zipf distribution, code, JSON tool calls and a little non-Latin
text, so that the byte-level BPE sees realistic token lengths. tests/package/test_bundled_tokenizers.py checks
that the shipped files equal what this script produces.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

# Training must be single-threaded to be deterministic.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.corpus import corpus

SEED = 20261130
CHATML_VOCAB = 16000
BERT_VOCAB = 8000
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "borrowguard" / "data" / "tokenizers"

CHATML_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<tool_call>",
    "</tool_call>",
]
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Content may be a string or a list of parts (vLLM passes the "openai" form): one macro renders both, for
# every role, so a system message with parts works like a user message with parts.
CHAT_TEMPLATE = (
    "{%- macro render(content) %}"
    "{%- if content is string %}{{- content }}"
    "{%- elif content %}"
    "{%- for part in content %}"
    "{%- if part.type == 'image' or part.type == 'image_url' or 'image' in part %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part.type == 'text' %}{{- part.text }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{%- endmacro %}"
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- render(messages[0].content) + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- if not tools %}{{- '<|im_start|>system\\n' + render(message.content) + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + render(message.content) + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + render(message.content) }}"
    "{%- if message.role == 'assistant' and message.tool_calls %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- set call = tool_call.function if tool_call.function else tool_call %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' }}'
    "{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_chatml(seed: int = SEED) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    # The pre-tokenizer Qwen2 uses (transformers 5.x's Qwen2Tokenizer rebuilds exactly this one).
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=CHATML_VOCAB,
        min_frequency=2,
        special_tokens=CHATML_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    return tok


def wordpiece_vocab(seed: int = SEED, size: int = BERT_VOCAB) -> dict[str, int]:
    """A WordPiece vocabulary counted directly from the corpus, so it is the same with every tokenizers version.

    (tokenizers' WordPieceTrainer breaks ties differently from run to run.) Specials, then every character
    seen alone and as a continuation, then the most frequent whole words and word endings, ties by text.
    """
    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words: Counter[str] = Counter()
    for line in corpus(seed + 1):
        words.update(w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(line)))
    chars = sorted({c for w in words for c in w})
    endings: Counter[str] = Counter()
    for word, count in words.items():
        for n in (2, 3, 4):
            if len(word) > n:
                endings["##" + word[-n:]] += count
    vocab = list(BERT_SPECIALS) + chars + ["##" + c for c in chars]
    ranked = sorted(words.items(), key=lambda kv: (-kv[1], kv[0])) + sorted(
        endings.items(), key=lambda kv: (-kv[1], kv[0])
    )
    ranked.sort(key=lambda kv: (-kv[1], kv[0]))
    seen = set(vocab)
    for token, _ in ranked:
        if len(vocab) >= size:
            break
        if token not in seen:
            seen.add(token)
            vocab.append(token)
    return {token: i for i, token in enumerate(vocab)}


def build_bert(seed: int = SEED) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(wordpiece_vocab(seed), unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(BERT_SPECIALS)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def _added_token(content: str, idx: int, special: bool = True) -> dict:
    return {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": special,
    }


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def write_chatml(out: Path, tok: Tokenizer) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=True)
    ids = {t: tok.token_to_id(t) for t in CHATML_SPECIALS}
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "Qwen2Tokenizer",
            "model_max_length": 32768,
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "additional_special_tokens": [
                t for t in CHATML_SPECIALS if t not in ("<|endoftext|>", "<|im_end|>")
            ],
            "added_tokens_decoder": {str(ids[t]): _added_token(t, ids[t]) for t in CHATML_SPECIALS},
            "clean_up_tokenization_spaces": False,
            "split_special_tokens": False,
            "errors": "replace",
            "chat_template": CHAT_TEMPLATE,
        },
    )
    # vocab.json + merges.txt let slow Qwen2/GPT-2 tokenizers and tools that expect them load the files too.
    model = json.loads(tok.to_str())["model"]
    _write_json(out / "vocab.json", model["vocab"])
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")


def write_bert(out: Path, tok: Tokenizer) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=True)
    vocab = sorted(tok.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    (out / "vocab.txt").write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "BertTokenizer",
            "model_max_length": 512,
            "do_lower_case": True,
            "tokenize_chinese_chars": True,
            "strip_accents": None,
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
            "clean_up_tokenization_spaces": True,
        },
    )


def build_all(out: Path, seed: int = SEED) -> None:
    write_chatml(out / "chatml-bpe", build_chatml(seed))
    write_bert(out / "bert-wordpiece", build_bert(seed))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    build_all(args.out, args.seed)
    print(f"wrote {args.out / 'chatml-bpe'} and {args.out / 'bert-wordpiece'}")


if __name__ == "__main__":
    main()
