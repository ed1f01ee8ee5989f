"""A server that accepts connections and never answers: a hung target, for signal and timeout tests.

    with HangingServer() as srv:      # srv.url; srv.accepted is set once a connection came in
        ...
"""

from __future__ import annotations

import socket
import threading


class HangingServer:
    """Listens on 127.0.0.1, reads whatever comes, answers nothing; every connection is closed on exit."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted = threading.Event()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._conns.append(conn)  # kept open, never written to
            self.accepted.set()

    def __enter__(self) -> HangingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._conns:
            conn.close()
        self._sock.close()
