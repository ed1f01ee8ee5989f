"""The pooling scenarios: embeddings, rerank, score, pooling and classify requests that reach the race.

Embedding and reranking servers (vLLM `--runner pooling`, FastAPI apps on transformers) tokenize every
input with the request's own settings, so the shapes that collide sit side by side here:
- a single text (not padded) beside a batch (padded to its longest member, tokenized as one call);
- no `truncate_prompt_tokens` beside a small one and `-1` (vLLM: the model's maximum, which puts the call in
  another microbatch queue than any other length). Inputs cut to a few tokens are long texts: the
  tokenizer works long on them, the model only sees the first tokens; `-1` ones are of ordinary length
  (the model sees them whole, and a CPU server must still keep up);
- query/document pairs (`/rerank`, `/v1/rerank`, `/score`): the tokenizer's pair path;
- token-id input, which skips the tokenizer: a control on the same endpoint.

Repeats are byte-identical bodies; their `usage.prompt_tokens` (and vectors) must never differ.
Untruncated texts scale with the scenario's ContextFit scale, like every other scenario.
"""

from __future__ import annotations

import random
from typing import Any

from borrowguard.load.filler import words

# scenario -> the paths that serve it (any one is enough; load.scenarios.Endpoint has them all)
SCENARIO_ENDPOINTS: dict[str, tuple[str, ...]] = {
    "embed": ("/v1/embeddings",),
    "rerank": ("/v1/rerank", "/rerank"),
    "score": ("/score",),
    "pooling": ("/pooling",),
    "classify": ("/classify",),
}
POOLING_SCENARIOS = tuple(SCENARIO_ENDPOINTS)
PAIR_SCENARIOS = frozenset({"rerank", "score"})
REPEAT_VARIANTS = ("plain", "trunc", "full", "batch")
SHORT_WORDS = (12, 60, 200)  # untruncated texts, scaled to the context
LONG_WORDS = (600, 1800)  # truncated texts: long for the tokenizer, cheap for the model
TRUNCATE_RANGE = (8, 64)
MAX_BATCH = 6
MAX_IDS = 48
IDS_BELOW = 256  # ids below 256 exist in every byte-level and most other vocabularies


def body(scenario: str, model: str, rng: random.Random | None, scale: float, variant: str = "unique", *,
         extensions: bool = True) -> dict[str, Any]:
    """The JSON body of one request. `rng=None` gives the fixed content of the repeat `variant`.
    Without `extensions` (vLLM's `truncate_prompt_tokens`), nothing is truncated and texts stay short."""
    r = rng or random.Random(f"{scenario}/{variant}")
    shape = variant if rng is None else r.choice(("plain", "trunc", "full", "batch", "batch", "ids"))
    if not extensions and shape in ("trunc", "full"):
        shape = "plain"
    if scenario in PAIR_SCENARIOS:
        return _pairs(scenario, model, r, scale, shape, extensions)
    out: dict[str, Any] = {"model": model}
    if shape == "ids" and scenario == "embed":
        out["input"] = [r.randrange(5, IDS_BELOW) for _ in range(r.randint(8, MAX_IDS))]
        return out
    truncate = _truncate(r, shape, extensions)
    n = r.randint(2, MAX_BATCH) if shape == "batch" else 1
    texts = [_text(r, scale, truncated=truncate is not None and truncate > 0) for _ in range(n)]
    out["input"] = texts if shape == "batch" else texts[0]
    if truncate is not None:
        out["truncate_prompt_tokens"] = truncate
    return out


def _pairs(scenario: str, model: str, r: random.Random, scale: float, shape: str,
           extensions: bool) -> dict[str, Any]:
    truncate = _truncate(r, shape, extensions)
    query = words(r, max(2, int(r.randint(4, 20) * min(1.0, scale * 4))))
    documents = [_text(r, scale, truncated=truncate is not None and truncate > 0) for _ in range(r.randint(2, 5))]
    out: dict[str, Any] = {"model": model}
    if scenario == "score":
        out.update(text_1=query, text_2=documents)
    else:
        out.update(query=query, documents=documents)
    if truncate is not None:
        out["truncate_prompt_tokens"] = truncate
    return out


def _truncate(r: random.Random, shape: str, extensions: bool = True) -> int | None:
    if not extensions:
        return None
    if shape == "trunc" or (shape == "batch" and r.random() < 0.5):
        return r.randint(*TRUNCATE_RANGE)
    if shape == "full":
        return -1
    return None


def _text(r: random.Random, scale: float, *, truncated: bool) -> str:
    if truncated:
        return words(r, r.randint(*LONG_WORDS))
    return words(r, max(4, int(r.choice(SHORT_WORDS) * scale)))


def largest_prompt(model: str, scale: float) -> dict[str, Any]:
    """A /tokenize body as long as the scenario's longest untruncated input (a pair counts both sides)."""
    return {"model": model, "prompt": words(random.Random(7), max(4, int(max(SHORT_WORDS) * scale)) + 20)}


def probe_body(scenario: str, model: str) -> dict[str, Any]:
    """A tiny valid request, to learn whether the server serves the scenario's endpoint at all."""
    if scenario == "score":
        return {"model": model, "text_1": "engine token", "text_2": ["batch cache"]}
    if scenario == "rerank":
        return {"model": model, "query": "engine token", "documents": ["batch cache"]}
    return {"model": model, "input": "engine token batch"}
