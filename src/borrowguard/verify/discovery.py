"""Which tokenizing endpoints the target serves: each probed once with a tiny valid request.

A 404 or 405, or an answer saying the model does not support the task, means *not served* — never
"accepted". Anything else (a 200, a 400 about the request, even a 500 naming the tokenizer race) means the
endpoint exists and tokenizes. A probe that gets no answer at all is not evidence either way: it is
treated as served, and the load shows what the endpoint does.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

# vLLM: "The model does not support Embeddings API", "... does not support Rerank (Score) API",
# "Unsupported task: 'classify'"; others: "not supported for this model", "no such endpoint".
NOT_SUPPORTED = re.compile(
    r"does not support|not supported|unsupported task|no such (endpoint|route)|not implemented|unknown (route|endpoint)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class EndpointProbe:
    """What one probe learned about one path."""

    path: str
    served: bool
    status: int | None  # None: no HTTP answer
    message: str = ""

    @property
    def why(self) -> str:
        """For a path not served: what the server said, in a few words."""
        said = f"{self.status}" + (f" {self.message[:120]!r}" if self.message else "")
        return f"POST {self.path} answered {said}"


def served_from(path: str, status: int | None, message: str) -> EndpointProbe:
    """Judge one probe answer (pure; see the module docstring)."""
    if status in (404, 405, 501):
        return EndpointProbe(path, False, status, message)
    if status is not None and status >= 400 and NOT_SUPPORTED.search(message or ""):
        return EndpointProbe(path, False, status, message)
    return EndpointProbe(path, True, status, message)


Post = Callable[[str, dict[str, Any]], Awaitable[tuple[int, Any, str]]]


async def discover(post: Post, bodies: dict[str, dict[str, Any]]) -> dict[str, EndpointProbe]:
    """Probe every path of `bodies` once, all at the same time: path -> EndpointProbe."""

    async def one(path: str, body: dict[str, Any]) -> EndpointProbe:
        try:
            status, _, message = await post(path, body)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            return EndpointProbe(path, True, None, "no answer")
        return served_from(path, status, message)

    probes = await asyncio.gather(*(one(path, body) for path, body in bodies.items()))
    return {p.path: p for p in probes}
