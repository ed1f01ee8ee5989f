#!/usr/bin/env python3
"""Regenerate the bundled tokenizers in src/borrowguard/data/tokenizers, reproducibly and offline.

    python scripts/build_tokenizers.py [--out DIR]

Both tokenizers are trained on a synthetic corpus drawn from a seeded random.Random (SEED below), so no
text has to be downloaded and every run produces the same vocabulary and merges. The corpus mixes
English-like prose, pseudo-words with a Zipf distribution, code, JSON tool calls and a little non-Latin
text, so that the byte-level BPE sees realistic token lengths. tests/test_bundled_tokenizers.py checks
that the shipped files equal what this script produces.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

# Training must be single-threaded to be deterministic.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

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
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

COMMON = (
    "the of and to in a is that for it as was with be by on not he i this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so what can no said who "
    "more about up out them into do will time only could new other some these then two first may any like "
    "now my such make over our even most me state after also made many did must before back see through "
    "way where get much go well your know should down work year because come people just say each those "
    "take day good how long very still own find here thing give many well life great world between under "
    "model token request server thread batch image tool call engine memory cache queue error result value "
    "function system user assistant message content weather city price order search file read write "
    "temperature forecast account balance transfer schedule meeting summary report data table column"
).split()
SYLLABLES = (
    "ka ri to ma ne su lo pe vi da mo ra te shi an en in on un ar er or ur al el il ol ul "
    "str pro con ex tion ment ing ed ly est able ive ous ize ity ness ful less pre sub trans"
).split()
NON_LATIN = [
    "你好世界", "模型服务器", "并发请求", "Привет мир", "токенизатор", "こんにちは", "東京の天気",
    "مرحبا بالعالم", "안녕하세요", "Γειά σου κόσμε", "🙂", "🚀", "é à ü ß ñ ç",
]
TOOLS = ["get_weather", "search_web", "lookup_order", "send_email", "convert_currency", "run_sql"]
KEYS = ["city", "unit", "query", "order_id", "to", "subject", "amount", "from", "sql", "limit"]


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(n)]


def corpus(seed: int = SEED, lines: int = 60000) -> Iterator[str]:
    """The training text: deterministic for a given seed on every Python >= 3.10."""
    rng = random.Random(seed)
    lexicon = COMMON + _pseudo_words(rng, 3000)
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    for _ in range(lines):
        kind = rng.random()
        if kind < 0.70:
            words = rng.choices(lexicon, weights=weights, k=rng.randint(4, 30))
            sentence = " ".join(words)
            if rng.random() < 0.3:
                sentence = sentence.capitalize()
            yield sentence + rng.choice([".", ".", "?", "!", ",", ":"])
        elif kind < 0.82:
            name = rng.choice(TOOLS)
            args = {k: rng.choice([rng.choice(lexicon), rng.randint(0, 10000)]) for k in rng.sample(KEYS, 2)}
            yield json.dumps({"name": name, "arguments": args})
        elif kind < 0.92:
            var = rng.choice(lexicon)
            yield rng.choice(
                [
                    f"def {var}_{rng.randint(0, 99)}(x, y=None):\n    return x + {rng.randint(0, 9)}",
                    f"for i in range({rng.randint(1, 100)}):\n    {var}[i] = i * 2",
                    f'{{"id": {rng.randint(0, 999)}, "{var}": "{rng.choice(lexicon)}", "ok": true}}',
                    f"    if {var} is not None and len({var}) > {rng.randint(0, 64)}:",
                ]
            )
        else:
            yield " ".join(rng.choice(NON_LATIN) for _ in range(rng.randint(1, 4)))


CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- if not tools %}{{- '<|im_start|>system\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}"
    "{%- if message.content is string %}{{- message.content }}"
    "{%- else %}{%- for part in message.content %}{%- if part.type == 'text' %}{{- part.text }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.content is string %}{{- message.content }}"
    "{%- elif message.content %}"
    "{%- for part in message.content %}"
    "{%- if part.type == 'image' or part.type == 'image_url' or 'image' in part %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part.type == 'text' %}{{- part.text }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- set call = tool_call.function if tool_call.function else tool_call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' }}"
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
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
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


def build_bert(seed: int = SEED) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(
        vocab_size=BERT_VOCAB, min_frequency=2, special_tokens=BERT_SPECIALS, show_progress=False
    )
    tok.train_from_iterator(corpus(seed + 1), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def _added_token(content: str, idx: int, special: bool = True) -> dict:
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": special}


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
            "additional_special_tokens": [t for t in CHATML_SPECIALS if t not in ("<|endoftext|>", "<|im_end|>")],
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    build_all(args.out, args.seed)
    print(f"wrote {args.out / 'chatml-bpe'} and {args.out / 'bert-wordpiece'}")


if __name__ == "__main__":
    main()
