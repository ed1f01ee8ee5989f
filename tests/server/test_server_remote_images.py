"""Remote images (`serve --allow-remote-images`), fetched with aiohttp on the event loop: a timeout for
the whole exchange, a size limit checked as the body arrives, no scheme but http(s)."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from borrowguard.data import tokenizer_path
from borrowguard.server.frontend import FrontEnd, load_tokenizer
from borrowguard.server.images import ImageBounds, ImageError, fetch_remote
from borrowguard.server.protocol import APIError, parse_chat

pytestmark = pytest.mark.slow  # every test here talks to a real server subprocess


def _png(size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


PNG = _png((56, 56))  # 4 patches


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/cat.png":
            self._send(200, PNG)
        elif self.path == "/big-declared":
            self._send(200, b"x" * 5000)
        elif self.path == "/big-chunked":  # no Content-Length: the limit must hold as bytes arrive
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(10):
                self.wfile.write(b"3e8\r\n" + b"x" * 1000 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/drip":  # a byte every 0.2 s for 10 minutes: every read is quick, the whole is not
            self.send_response(200)
            self.send_header("Content-Length", "3000")
            self.end_headers()
            try:
                for _ in range(3000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
        elif self.path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, b"no")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


BOUNDS = ImageBounds(max_remote_bytes=4000, remote_timeout_s=60.0)
"""A timeout no fetch from 127.0.0.1 reaches on a busy machine; /drip alone takes 10 minutes."""
DRIP_BOUNDS = ImageBounds(max_remote_bytes=4000, remote_timeout_s=2.0)


def test_an_image_is_fetched(origin: str) -> None:
    assert asyncio.run(fetch_remote(origin + "/cat.png", BOUNDS)) == PNG


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/missing", "HTTP 404"),
        ("/big-declared", "larger than 4000 bytes"),
        ("/big-chunked", "larger than 4000 bytes"),
        ("/drip", "no complete answer within 2 s"),  # urllib's per-read timeout never fired here
        ("/to-file", "cannot fetch image"),
    ],
)
def test_what_cannot_be_fetched_is_an_image_error(origin: str, path: str, message: str) -> None:
    with pytest.raises(ImageError, match=message):
        asyncio.run(fetch_remote(origin + path, DRIP_BOUNDS if path == "/drip" else BOUNDS))


def test_the_front_end_fetches_before_the_image_thread(origin: str) -> None:
    frontend = FrontEnd(load_tokenizer(tokenizer_path()), workers=1, bounds=BOUNDS, allow_remote_images=True)
    try:
        def chat(url: str) -> object:
            image = {"type": "image_url", "image_url": {"url": url}}
            return parse_chat({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}]})

        prompt = asyncio.run(frontend.chat_prompt(chat(origin + "/cat.png")))
        pad = frontend.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        assert prompt.token_ids.count(pad) == 4
        with pytest.raises(APIError, match="image 0: cannot fetch image: HTTP 404") as info:
            asyncio.run(frontend.chat_prompt(chat(origin + "/missing")))
        assert info.value.status == 400
    finally:
        frontend.close()
