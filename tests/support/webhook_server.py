"""A loopback webhook receiver: records every POST (path, headers, JSON body).

`hang` makes it hold each request that long before answering (a dead webhook
that accepts the connection and never replies in time).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookServer:
    def __init__(self, status: int = 200, hang: float = 0.0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = status
        self.hang = hang
        self._released = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                owner.posts.append({"path": self.path, "headers": dict(self.headers),
                                    "body": json.loads(raw)})
                if owner.hang:
                    owner._released.wait(owner.hang)
                self.send_response(owner.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> WebhookServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
