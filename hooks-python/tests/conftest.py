# SPDX-License-Identifier: Apache-2.0

"""Shared fixtures: the conformance vectors, an OpenTelemetry SDK with an
in-memory exporter and the requests/httpx instrumentations, and scripted
HTTP callees on 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from zerocode.attrspy import AttributeSpy
from zerocode.grpcanswer import answer

HERE = Path(__file__).resolve().parent
CONFORMANCE_DIR = Path(os.environ.get("CONFORMANCE_DIR") or HERE.parent.parent / "conformance")


def load(name: str) -> Any:
    with open(CONFORMANCE_DIR / name, encoding="utf-8") as f:
        return json.load(f)


EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_PROVIDER)
RequestsInstrumentor().instrument()
HTTPXClientInstrumentor().instrument()

SPY = AttributeSpy()
SPY.install()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    SPY.clear()
    yield EXPORTER
    EXPORTER.clear()
    SPY.clear()


def hook_attrs(span: Any) -> dict[str, Any]:
    """What the hooks set on span, each attribute once (AttributeSpy)."""
    return SPY.hooks_set(span)


class Callee:
    """An HTTP server on 127.0.0.1 that answers each request with the next
    scripted response (status, Error-Claim) and records what it got."""

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.responses = list(responses)
        self.requests: list[str | None] = []
        self.bodies: list[str] = []
        self.lock = threading.Lock()
        callee = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                with callee.lock:
                    callee.requests.append(self.headers.get("Retry-Attempt"))
                    callee.bodies.append(body)
                    r = callee.responses.pop(0) if callee.responses else {"status": 599}
                self.send_response(r["status"])
                if r.get("claim") is not None:
                    self.send_header("Error-Claim", r["claim"])
                self.send_header("Content-Length", "2")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(b"ok")

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.address}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcCallee:
    """A gRPC server on 127.0.0.1 (generic handlers with bytes, no codegen)
    answering each call of /test.Svc/Call with the next scripted response
    (code, error-claim trailer)."""

    def __init__(
        self, responses: list[dict[str, Any]], interceptors: list[Any] | None = None, behavior: Any = None
    ) -> None:
        import grpc

        self.responses = list(responses)
        self.requests: list[str | None] = []
        self.lock = threading.Lock()

        def scripted(request: bytes, context: grpc.ServicerContext) -> bytes:
            md = dict(context.invocation_metadata())
            with self.lock:
                self.requests.append(md.get("grpc-previous-rpc-attempts"))
                r = self.responses.pop(0) if self.responses else {"code": "DATA_LOSS"}
            return answer(context, r["code"], r.get("claim"), "scripted")

        handler = grpc.method_handlers_generic_handler(
            "test.Svc", {"Call": grpc.unary_unary_rpc_method_handler(behavior or scripted)}
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(4), interceptors=interceptors or [])
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(0)


def _factory(cls: Any) -> Iterator[Any]:
    made: list[Any] = []

    def make(*args: Any, **kwargs: Any) -> Any:
        c = cls(*args, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def callee_factory() -> Iterator[Any]:
    yield from _factory(Callee)


@pytest.fixture
def grpc_factory() -> Iterator[Any]:
    yield from _factory(GrpcCallee)


class StaticHints:
    """A HintSource from a table: peer -> mode."""

    def __init__(self, modes: dict[str, str] | None = None, limits: Any = None) -> None:
        from errorownership_hooks import Mode, default_limits, parse_mode

        self._modes = {k: parse_mode(v) for k, v in (modes or {}).items()}
        self._unknown = Mode.UNKNOWN
        self._limits = limits or default_limits()

    def mode(self, operation: str, peer_service: str, peer_operation: str) -> Any:
        return self._modes.get(peer_service, self._unknown)

    def budget_limits(self) -> Any:
        return self._limits
