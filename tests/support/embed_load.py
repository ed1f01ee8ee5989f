"""A load on embedding / rerank / score endpoints, each answer checked against a serial reference.

Standard library only (threads + http.client), so it runs in any test environment. Used against the
FastAPI test server (support/embed_app.py) and against a real `vllm serve --runner pooling`.

    requests = embed_requests(model, seed=0)                 # a fixed set of distinct bodies
    ref = serial_reference(base_url, requests)               # each sent alone, one after the other
    result = hammer(base_url, requests, ref, seconds=10, concurrency=16)
    result.statuses, result.borrowed, result.wrong_counts, result.wrong_vectors

The set mixes what reaches the race: single texts (not padded) beside batches (padded to their longest),
requests with and without `truncate_prompt_tokens` (each its own max_length), token-id input, and
query/document pairs (the tokenizer's pair path). Every request is one of the set, so each answer under
load has a reference: its `usage.prompt_tokens` must equal the reference's, its vectors or scores match
within FLOAT_TOLERANCE. The old stack shows the race as 5xx "Already borrowed" answers, the newest one
as wrong counts and vectors.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

BORROWED = "Already borrowed"
TOKENIZER_MARKERS = ("Already borrowed", "Truncation error", "Failed to acquire tokenizer")
FLOAT_TOLERANCE = 1e-4
_WORDS = (  # noqa: SIM905 - words the bundled WordPiece vocabulary splits into few pieces, and any BPE handles
    "engine token batch cache model server thread queue request stream image vision tool result system "
    "user answer weather invoice latency memory kernel prompt budget region cluster shard replica policy "
    "review summary table column filter search report metric alert window buffer offset vector graph"
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


@dataclass(frozen=True)
class Req:
    kind: str  # "embed_single", "embed_batch", "embed_ids", "rerank", "score", ...
    path: str
    body: dict[str, Any]

    @property
    def data(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer (reset, timeout)
    prompt_tokens: int | None = None
    values: tuple[float, ...] | None = None  # the vectors (flattened) or scores, in input order
    text: str = ""  # the body (or the exception) of a failed answer, cut


@dataclass
class HammerResult:
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)  # "200", "500", "reset", ...
    borrowed: int = 0  # failed answers naming the tokenizer race
    wrong_counts: int = 0  # 200s whose prompt_tokens differ from the reference
    wrong_vectors: int = 0  # 200s whose vectors/scores differ (beyond FLOAT_TOLERANCE)
    by_kind: dict[str, Counter] = field(default_factory=dict)
    samples: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> int:
        return self.statuses.get("200", 0)

    @property
    def tokenizer_faults(self) -> int:
        """What the race did, whichever way the stack shows it."""
        return self.borrowed + self.wrong_counts + self.wrong_vectors

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "statuses": dict(self.statuses), "borrowed": self.borrowed,
                "wrong_counts": self.wrong_counts, "wrong_vectors": self.wrong_vectors,
                "by_kind": {k: dict(v) for k, v in self.by_kind.items()}}


def embed_requests(model: str, *, seed: int = 0, endpoints: tuple[str, ...] = ("embeddings", "rerank", "score"),
                   rerank_path: str = "/v1/rerank", max_truncate: int = 64, ids_below: int = 1000,
                   long_words: tuple[int, int] = (150, 350)) -> list[Req]:
    """A fixed set of distinct requests on the endpoints named (see the module docstring). `long_words`:
    the length of the texts that are truncated (a long text keeps the tokenizer busy, and truncation keeps
    the model's share small)."""
    r = random.Random(seed)
    out: list[Req] = []
    for i in range(6 if "embeddings" in endpoints else 0):
        long = words(r, r.randint(*long_words))
        trunc = r.randint(4, max_truncate)
        out.append(Req("embed_single", "/v1/embeddings", {"model": model, "input": words(r, r.randint(150, 350))}))
        # -1: truncate at the model's maximum (vLLM: max_length == model_max_length, its own tokenizer queue)
        out.append(Req("embed_single_full", "/v1/embeddings",
                       {"model": model, "input": long, "truncate_prompt_tokens": -1}))
        out.append(Req("embed_single_trunc", "/v1/embeddings",
                       {"model": model, "input": long, "truncate_prompt_tokens": trunc}))
        if i % 3:  # truncated: long texts; not: short ones
            batch = [words(r, r.randint(*long_words)) for _ in range(r.randint(3, 8))]
            body: dict[str, Any] = {"model": model, "input": batch,
                                    "truncate_prompt_tokens": -1 if i % 3 == 2 else r.randint(4, max_truncate)}
        else:
            body = {"model": model, "input": [words(r, r.randint(5, 300)) for _ in range(r.randint(3, 8))]}
        out.append(Req("embed_batch", "/v1/embeddings", body))
        out.append(Req("embed_ids", "/v1/embeddings",
                       {"model": model, "input": [r.randrange(5, ids_below) for _ in range(r.randint(8, 64))]}))
    for i in range(6 if "rerank" in endpoints else 0):
        body = {"model": model, "query": words(r, r.randint(4, 20)),
                "documents": [words(r, r.randint(20, 250)) for _ in range(r.randint(2, 6))]}
        if i % 3:
            body["truncate_prompt_tokens"] = -1 if i % 3 == 2 else r.randint(16, max_truncate)
        out.append(Req("rerank", rerank_path, body))
    for _ in range(3 if "score" in endpoints else 0):
        out.append(Req("score", "/score", {"model": model, "text_1": words(r, r.randint(4, 20)),
                                           "text_2": [words(r, r.randint(20, 200)) for _ in range(3)]}))
    return out


def _values(doc: Any) -> tuple[float, ...] | None:
    """The numbers an answer carries, in input order: embedding vectors, rerank or score values."""
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("results"), list):  # rerank: sorted by score; put back in input order
        items = sorted((x for x in doc["results"] if isinstance(x, dict)), key=lambda x: x.get("index", 0))
        return tuple(float(x.get("relevance_score", 0.0)) for x in items)
    data = doc.get("data")
    if not isinstance(data, list):
        return None
    items = sorted((x for x in data if isinstance(x, dict)), key=lambda x: x.get("index", 0))
    flat: list[float] = []
    for x in items:
        v = x.get("embedding", x.get("score", x.get("data")))
        flat.extend(_flatten(v))
    return tuple(flat)


def _flatten(v: Any) -> list[float]:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return [float(v)]
    if isinstance(v, list):
        return [f for x in v for f in _flatten(x)]
    return []


def send(base_url: str, req: Req, timeout: float = 120.0) -> Answer:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", req.path, body=req.data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, text=f"{type(exc).__name__}: {exc}"[:600])
    finally:
        conn.close()
    text = raw.decode("utf-8", "replace")
    if resp.status != 200:
        return Answer(resp.status, text=text[:600])
    try:
        doc = json.loads(text)
    except ValueError:
        return Answer(resp.status, text="not JSON: " + text[:200])
    usage = doc.get("usage") if isinstance(doc, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Answer(resp.status, tokens if isinstance(tokens, int) else None, _values(doc))


def serial_reference(base_url: str, requests: list[Req]) -> list[Answer]:
    """Each request alone, one after the other, before any load: what every answer under load must equal."""
    answers = [send(base_url, req) for req in requests]
    bad = [(req.kind, a.status, a.text[:200]) for req, a in zip(requests, answers) if a.status != 200]
    if bad:
        raise RuntimeError(f"the serial reference failed: {bad[:5]}")
    return answers


def same(a: Answer, ref: Answer) -> tuple[bool, bool]:
    """(counts equal, values equal within FLOAT_TOLERANCE)."""
    counts = a.prompt_tokens == ref.prompt_tokens
    if a.values is None or ref.values is None or len(a.values) != len(ref.values):
        return counts, a.values == ref.values
    return counts, all(abs(x - y) <= FLOAT_TOLERANCE for x, y in zip(a.values, ref.values))


def hammer(base_url: str, requests: list[Req], reference: list[Answer], *, seconds: float,
           concurrency: int = 16, seed: int = 0) -> HammerResult:
    """`concurrency` threads sending random members of `requests` for `seconds`, each answer checked."""
    result = HammerResult()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        while time.monotonic() < deadline:
            i = rng.randrange(len(requests))
            req, answer = requests[i], send(base_url, requests[i])
            label = "reset" if answer.status is None else str(answer.status)
            with lock:
                result.requests += 1
                result.statuses[label] += 1
                kind = result.by_kind.setdefault(req.kind, Counter())
                kind[label] += 1
                if answer.status != 200:
                    if any(m in answer.text for m in TOKENIZER_MARKERS):
                        result.borrowed += 1
                        kind["borrowed"] += 1
                    result.samples.setdefault(f"{req.kind} {label}", answer.text[:300])
                    continue
                counts, values = same(answer, reference[i])
                if not counts:
                    result.wrong_counts += 1
                    kind["wrong_counts"] += 1
                    result.samples.setdefault(f"{req.kind} count",
                                              f"{answer.prompt_tokens} != {reference[i].prompt_tokens}")
                if not values:
                    result.wrong_vectors += 1
                    kind["wrong_vectors"] += 1

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 300)
    return result
