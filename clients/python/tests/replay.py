"""A real HTTP server on loopback that answers every request with one canned answer and counts
the requests: for the answers a healthy local ``rara ui`` cannot be made to give (a 500, a 503,
an IAM ``forbidden``, a bulk ``too_many``), and for the retry policy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Replay:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.requests: list[tuple[str, str]] = []
        self.url = ""


@contextmanager
def replaying(status: int, body: Any) -> Iterator[Replay]:
    replay = Replay(status, body)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            replay.requests.append((self.command, self.path))
            self.send_response(replay.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(replay.body)))
            self.end_headers()
            self.wfile.write(replay.body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    replay.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield replay
    finally:
        server.shutdown()
        server.server_close()
