"""The bundled OpenAI-compatible reference server: a real front end and a STUB engine.

The front end is what breaks in production: the chat template (with tools), image decoding and
placeholder expansion, and one tokenizer shared by a pool of tokenization threads and an image thread.
The engine is a stub: deterministic text or schema-valid tool calls, real token counts, no model.

    borrowguard serve --guard off        # see the failure (old stack: "Already borrowed" 500s)
    ServerProcess(guard=True)            # start it as a subprocess (verify, tests)

Modules: config (settings), protocol (request parsing, API errors), tools (JSON schema), images,
frontend (tokenizer threads), engine (stub), metrics (Prometheus), logs (vLLM format), app (FastAPI
routes), runner (start in this process), process (start as a subprocess).
"""

from __future__ import annotations

from borrowguard.server.config import DEFAULT_MODEL, ServerConfig
from borrowguard.server.process import ServerProcess, ServerStartError

__all__ = ["DEFAULT_MODEL", "ServerConfig", "ServerProcess", "ServerStartError"]
