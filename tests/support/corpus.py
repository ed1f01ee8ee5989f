"""A deterministic synthetic corpus: training text for the bundled tokenizers and prompts for benchmarks.

Drawn from a seeded random.Random, so it is identical on every Python >= 3.10 and needs no download. It mixes
English-like prose, pseudo-words with a Zipf distribution, code, JSON tool calls and a little non-Latin
text. Changing it changes the bundled tokenizers (tests/package/test_bundled_tokenizers.py would say so).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator

COMMON = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "i",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "if",
    "so",
    "what",
    "can",
    "no",
    "said",
    "who",
    "more",
    "about",
    "up",
    "out",
    "them",
    "into",
    "do",
    "will",
    "time",
    "only",
    "could",
    "new",
    "other",
    "some",
    "these",
    "then",
    "two",
    "first",
    "may",
    "any",
    "like",
    "now",
    "my",
    "such",
    "make",
    "over",
    "our",
    "even",
    "most",
    "me",
    "state",
    "after",
    "also",
    "made",
    "many",
    "did",
    "must",
    "before",
    "back",
    "see",
    "through",
    "way",
    "where",
    "get",
    "much",
    "go",
    "well",
    "your",
    "know",
    "should",
    "down",
    "work",
    "year",
    "because",
    "come",
    "people",
    "just",
    "say",
    "each",
    "those",
    "take",
    "day",
    "good",
    "how",
    "long",
    "very",
    "still",
    "own",
    "find",
    "here",
    "thing",
    "give",
    "many",
    "well",
    "life",
    "great",
    "world",
    "between",
    "under",
    "model",
    "token",
    "request",
    "server",
    "thread",
    "batch",
    "image",
    "tool",
    "call",
    "engine",
    "memory",
    "cache",
    "queue",
    "error",
    "result",
    "value",
    "function",
    "system",
    "user",
    "assistant",
    "message",
    "content",
    "weather",
    "city",
    "price",
    "order",
    "search",
    "file",
    "read",
    "write",
    "temperature",
    "forecast",
    "account",
    "balance",
    "transfer",
    "schedule",
    "meeting",
    "summary",
    "report",
    "data",
    "table",
    "column",
]
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "ma",
    "ne",
    "su",
    "lo",
    "pe",
    "vi",
    "da",
    "mo",
    "ra",
    "te",
    "shi",
    "an",
    "en",
    "in",
    "on",
    "un",
    "ar",
    "er",
    "or",
    "ur",
    "al",
    "el",
    "il",
    "ol",
    "ul",
    "str",
    "pro",
    "con",
    "ex",
    "tion",
    "ment",
    "ing",
    "ed",
    "ly",
    "est",
    "able",
    "ive",
    "ous",
    "ize",
    "ity",
    "ness",
    "ful",
    "less",
    "pre",
    "sub",
    "trans",
]
NON_LATIN = [
    "你好世界",
    "模型服务器",
    "并发请求",
    "Привет мир",
    "токенизатор",
    "こんにちは",
    "東京の天気",
    "مرحبا بالعالم",
    "안녕하세요",
    "Γειά σου κόσμε",
    "🙂",
    "🚀",
    "é à ü ß ñ ç",
]
TOOLS = ["get_weather", "search_web", "lookup_order", "send_email", "convert_currency", "run_sql"]
KEYS = ["city", "unit", "query", "order_id", "to", "subject", "amount", "from", "sql", "limit"]


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(n)]


def corpus(seed: int, lines: int = 80000) -> Iterator[str]:
    """The training text: deterministic for a given seed on every Python >= 3.10."""
    rng = random.Random(seed)
    lexicon = COMMON + _pseudo_words(rng, 9000)
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


def prompts(
    seed: int, rng: random.Random, lengths: Iterable[int], *, lines: int = 3000, cut: bool = False
) -> list[str]:
    """Prose prompts for the benches, one per length in `lengths` (words; exactly that many with `cut`, else
    at least): consecutive lines of the corpus from a start that `rng` draws, its JSON lines left out."""
    prose = [line for line in corpus(seed=seed, lines=lines) if not line.startswith("{")]
    out = []
    for words in lengths:
        start, chunk, n = rng.randrange(len(prose)), [], 0
        while n < words:
            line = prose[(start + len(chunk)) % len(prose)]
            chunk.append(line)
            n += len(line.split())
        text = " ".join(chunk)
        out.append(" ".join(text.split()[:words]) if cut else text)
    return out
