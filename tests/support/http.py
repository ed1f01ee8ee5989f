"""Plain, synchronous HTTP for tests that poke a server subprocess one request at a time."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class HTTPReply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def request(base_url: str | Any, method: str, path: str, body: Any = None,
            headers: Mapping[str, str] | None = None, timeout: float = 60.0) -> HTTPReply:
    """One request on a fresh connection. `base_url` may be an object with a `.url` (a ServerProcess).
    `body`: bytes are sent as is, anything else as JSON."""
    url = getattr(base_url, "url", base_url)
    if not url:
        raise RuntimeError("the server is not running")
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    all_headers = dict(headers or {})
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
        all_headers.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=all_headers)
        response = conn.getresponse()
        data = response.read()
        return HTTPReply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()


def wait_healthy(base_url: str | Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, http.client.HTTPException):
            if request(base_url, "GET", "/health", timeout=2).status == 200:
                return True
        time.sleep(0.1)
    return False
