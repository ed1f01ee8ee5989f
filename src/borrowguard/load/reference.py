"""The serial reference: each repeated request sent alone, before the load, and what it got back.

Identical requests compared only with each other cannot show a server that is consistently wrong under
load; each repeat variant is therefore first sent alone, one request at a time, and every answer to it under
load must equal that reference: the same `usage.prompt_tokens` (or /tokenize count) and, for pooling
answers, the same vectors within VECTOR_TOLERANCE. That is where the silent leak of tokenizers >= 0.23
shows on an embedding server: another request's truncation changes the tokens, so the vector.

    references = await take(client, factory, have=references)   # before each level
    LoadMetrics(factory.scenarios, references)                   # compares every repeat with them
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass

from borrowguard.load.client import ChatClient
from borrowguard.load.scenarios import RequestFactory

# Relative L2 distance two vectors of identical requests may differ by: far above the numeric noise of a
# batch of another size (float32 on a CPU: ~1e-6; bf16 on a GPU: ~1e-3), far below what another request's
# truncation does to a pooled vector (a different token sequence: tens of percent).
VECTOR_TOLERANCE = 0.01
# One request alone answers fast on any server that can take the load; a reference that waits longer says
# nothing the load will not show (a stall), and must not hold the run for --timeout per repeat variant.
REFERENCE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Reference:
    """What one repeat variant got when sent alone: None where the answer carried no such value."""

    key: str
    prompt_tokens: int | None
    vectors: tuple[tuple[float, ...], ...] | None
    failed: str | None = None  # the reference request's own failure: nothing to compare with

    @property
    def usable(self) -> bool:
        return self.failed is None and (self.prompt_tokens is not None or self.vectors is not None)


def distance(a: tuple[tuple[float, ...], ...], b: tuple[tuple[float, ...], ...]) -> float:
    """The largest relative L2 distance between matching items; inf when the shapes differ."""
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b):
        if len(x) != len(y):
            return math.inf
        diff = math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y)))
        norm = max(math.sqrt(sum(p * p for p in x)), math.sqrt(sum(q * q for q in y)), 1e-12)
        worst = max(worst, diff / norm)
    return worst


async def take(client: ChatClient, factory: RequestFactory, have: Mapping[str, Reference]) -> dict[str, Reference]:
    """Send every repeat variant of the mix at the current fit generation that has no reference yet, alone
    and one after another; the requests' bodies are the ones the load will repeat (the factory caches them)."""
    loop = asyncio.get_running_loop()
    taken: dict[str, Reference] = {}
    for scenario in factory.scenarios:
        for variant in factory.repeat_variants(scenario):
            plan = factory.repeat_plan(scenario, variant)
            key = plan.repeat_key
            if key is None or key in have or key in taken:
                continue
            if factory.needs_thread(plan):
                built = await loop.run_in_executor(None, factory.build, plan)
            else:
                built = factory.build(plan)
            try:
                outcome = await asyncio.wait_for(client.send(built), min(client.timeout, REFERENCE_TIMEOUT_S))
            except asyncio.TimeoutError:
                taken[key] = Reference(key, None, None, failed=f"no answer within {REFERENCE_TIMEOUT_S:g} s alone")
                return taken  # a stall: the load will show it
            if outcome.ok:
                taken[key] = Reference(key, outcome.prompt_tokens, outcome.vectors)
                continue
            taken[key] = Reference(key, None, None, failed=f"{outcome.label}: {outcome.message or ''}"[:200])
            if outcome.status is None:  # no answer at all (a stall, a reset): the load will show it, not here
                return taken
    return taken
