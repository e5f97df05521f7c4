# SPDX-License-Identifier: Apache-2.0

"""A hints server on 127.0.0.1 that serves what a test sets."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class HintServer:
    def __init__(self) -> None:
        self.status = 200
        self.body: bytes = b""
        self.headers: dict[str, str] = {}
        self.last_inm: str | None = None
        self.delay = 0.0  # seconds before answering
        self.trickle: float | None = None  # seconds between body bytes
        self.fetches = 0
        self.lock = threading.Lock()
        s = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                u = urlsplit(self.path)
                with s.lock:
                    s.fetches += 1
                    status, body, headers = s.status, s.body, dict(s.headers)
                    delay, trickle = s.delay, s.trickle
                    if u.path != "/v1/hints" or parse_qs(u.query).get("service") != ["checkout"]:
                        status, body, headers = 404, b"not found", {}
                    s.last_inm = self.headers.get("If-None-Match")
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    if status != 304:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if status == 304:
                        return
                    if trickle is None:
                        self.wfile.write(body)
                    else:
                        for i in range(len(body)):
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                            time.sleep(trickle)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def serve(self, status: int, body: str | bytes, headers: dict[str, str] | None = None) -> None:
        with self.lock:
            self.status = status
            self.body = body.encode() if isinstance(body, str) else body
            self.headers = dict(headers or {})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
