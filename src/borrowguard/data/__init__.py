"""Files shipped with the package: the two bundled tokenizers (see scripts/build_tokenizers.py)."""

from __future__ import annotations

from pathlib import Path

TOKENIZERS_DIR = Path(__file__).resolve().parent / "tokenizers"
CHATML = "chatml-bpe"
"""Byte-level BPE with ChatML special tokens and a chat template for tools and images (Qwen2-style)."""
WORDPIECE = "bert-wordpiece"
"""BERT-style WordPiece whose post-processor adds [CLS]/[SEP] and supports pairs."""
BUNDLED = (CHATML, WORDPIECE)


def tokenizer_path(name: str = CHATML) -> Path:
    """The directory of a bundled tokenizer, loadable with `AutoTokenizer.from_pretrained(path)`."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled tokenizer {name!r}; choose one of {', '.join(BUNDLED)}")
    return TOKENIZERS_DIR / name
