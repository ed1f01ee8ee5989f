"""The one tool set of the project: what verify's tool-heavy chats declare and what the race workload's
chat templates render (tool schemas are a large, fixed part of a tool-calling prompt)."""

from __future__ import annotations

from typing import Any

_SPECS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("get_weather", "Current weather for a city.", (("city", "string"), ("unit", "string"))),
    ("search_docs", "Full-text search over the knowledge base.", (("query", "string"), ("limit", "integer"))),
    ("read_file", "Read a file from the workspace.", (("path", "string"), ("max_bytes", "integer"))),
    ("run_sql", "Run a read-only SQL query.", (("sql", "string"), ("timeout_s", "number"))),
    ("send_email", "Send an e-mail.", (("to", "string"), ("subject", "string"), ("body", "string"))),
    ("create_ticket", "Open a ticket in the tracker.", (("title", "string"), ("priority", "integer"))),
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": t, "description": f"The {p.replace('_', ' ')}."} for p, t in params},
                "required": [params[0][0]],
            },
        },
    }
    for name, description, params in _SPECS
]
