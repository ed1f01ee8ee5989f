"""The causal chain: found problems in the order the operator should read them, causes first.

The edges are how one failure produces another in LLM servers (vLLM above all): a tokenizer borrow error
makes the multimodal processor retry ("Failed to acquire tokenizer"), then fail the request with a 400, can
leave the multimodal caches out of step, and with enough of it the engine dies; after that every request
fails. Each root also points at its environment cause through the knowledge base's `related` ids, so the
remedy is the one written once there.
"""

from __future__ import annotations

from collections.abc import Sequence

from borrowguard.knowledge import KnowledgeBase
from borrowguard.scan.model import ChainStep, Finding

CAUSES: dict[str, tuple[str, ...]] = {
    "tokenizer-already-borrowed": (
        "tokenizer-acquire-retry", "http-error-status", "mm-cache-desync", "engine-dead",
    ),
    "tokenizer-acquire-retry": ("http-error-status",),
    "mm-cache-desync": ("engine-dead", "http-error-status"),
    "shm-broadcast-stall": ("nccl-failure", "engine-dead", "http-error-status"),
    "nccl-failure": ("engine-dead", "http-error-status"),
    "cuda-oom": ("engine-dead", "http-error-status"),
}
"""Cause -> what it leads to. Only edges observed in real servers; an unrelated pair stays unordered."""

_ADVICE = {
    "tokenizer-already-borrowed": "fix the tokenizer race first; the later failures follow from it",
    "tokenizer-acquire-retry": "the retries hide tokenizer borrow errors: fix the tokenizer race first",
    "shm-broadcast-stall": "a rank is hanging; on aarch64 with NCCL 2.28.0-2.29.2 it is the NCCL proxy leak",
    "mm-cache-desync": "the multimodal caches drifted; fix what made requests fail, then upgrade vLLM",
    "nccl-failure": "fix NCCL first; the engine died because a collective failed",
    "cuda-oom": "the GPU ran out of memory first; lower --gpu-memory-utilization or the batch size",
}


def build_chain(findings: Sequence[Finding], kb: KnowledgeBase) -> list[ChainStep]:
    """Found problems in causal order (ties: the order given, i.e. first occurrence), each root (nothing
    found explains it) followed by its environment causes. Empty when nothing was found."""
    present = {f.id: f for f in findings}
    causes_of: dict[str, tuple[str, ...]] = {
        fid: tuple(c for c, effects in CAUSES.items() if fid in effects and c in present and c != fid)
        for fid in present
    }
    steps: list[ChainStep] = []
    env_seen: set[str] = set()
    for fid in _causal_order(present, causes_of):
        f = present[fid]
        if causes_of[fid]:
            steps.append(ChainStep(fid, f.title, "consequence", causes_of[fid]))
        else:
            advice = _ADVICE.get(fid) if len(present) > 1 or f.related else None
            steps.append(ChainStep(fid, f.title, "root", (), advice))
            for env_id in f.related:
                env = kb.get(env_id)
                if env is not None and env_id not in env_seen:
                    env_seen.add(env_id)
                    remedy = env.remedies[0] if env.remedies else None
                    steps.append(ChainStep(env_id, env.title, "environment", (fid,), remedy))
    return steps


def _causal_order(present: dict[str, Finding], causes_of: dict[str, tuple[str, ...]]) -> list[str]:
    # Kahn's algorithm over the found problems; ties keep the given order (first occurrence first).
    order: list[str] = []
    remaining = list(present)
    while remaining:
        ready = [fid for fid in remaining if all(c in order for c in causes_of[fid])]
        if not ready:  # a cycle cannot come from CAUSES, but never loop forever on one
            ready = remaining[:1]
        order.append(ready[0])
        remaining.remove(ready[0])
    return order


def summary(steps: Sequence[ChainStep]) -> str | None:
    """One line: "a → b → c: advice" for the longest path of found problems, None for fewer than two."""
    found = [s for s in steps if s.role != "environment"]
    if len(found) < 2:
        return None
    advice = next((s.advice for s in found if s.role == "root" and s.advice), None)
    arrow = " → ".join(s.id for s in found)
    return f"{arrow}: {advice}" if advice else arrow
