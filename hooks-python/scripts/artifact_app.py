# SPDX-License-Identifier: Apache-2.0

"""A service as a user of the built wheel writes it, run by
scripts/artifact_test.py in a fresh venv outside the source tree: a WSGI
app under opentelemetry-instrumentation-wsgi and the hooks' middleware, on
127.0.0.1 port 0, called through the hooks' requests Session under
opentelemetry-instrumentation-requests.

  GET /own    fails on its own: the hooks claim it, so the caller retries
              it until its attempts run out.
  GET /relay  calls /own, which fails, and fails in turn: the hooks unclaim
              it, so the caller does not retry it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from opentelemetry import trace
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import errorownership_hooks
from errorownership_hooks.requests import Session
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
RequestsInstrumentor().instrument()

# What the server saw: (path, Retry-Attempt header) per request.
seen: list[tuple[str, str | None]] = []
seen_lock = threading.Lock()
base_url = ""


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    with seen_lock:
        seen.append((path, environ.get("HTTP_RETRY_ATTEMPT")))
    if path == "/relay":
        with Session() as s:
            s.get(base_url + "/own", timeout=10)
    start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
    return [b"failed\n"]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    # /relay calls back into this server while it serves /relay.
    daemon_threads = True


def check(what: str, got: object, want: object) -> bool:
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r}" + ("" if ok else f", want {want!r}"))
    return ok


def decisions(spans: Iterable[ReadableSpan]) -> list[object]:
    return [(s.attributes or {}).get("error_ownership.retry.decision") for s in spans]


def main() -> int:
    global base_url
    print(f"errorownership-hooks {errorownership_hooks.__version__} from {errorownership_hooks.__file__}")
    if not errorownership_hooks.__file__ or not errorownership_hooks.__file__.startswith(sys.prefix):
        print("FAIL the hooks were not imported from this venv")
        return 1

    server = make_server(
        "127.0.0.1",
        0,
        OpenTelemetryMiddleware(ErrorOwnershipMiddleware(app)),
        server_class=ThreadingWSGIServer,
        handler_class=QuietHandler,
    )
    port = server.server_address[1]
    base_url = f"http://127.0.0.1:{port}"
    print(f"server on 127.0.0.1:{port}")
    threading.Thread(target=server.serve_forever, daemon=True).start()

    ok = True
    with Session() as client:
        own = client.get(base_url + "/own", timeout=30)
        ok &= check("GET /own status", own.status_code, 500)
        ok &= check("GET /own Error-Claim", own.headers.get("Error-Claim"), "claimed")
        with seen_lock:
            ok &= check("GET /own attempts (Retry-Attempt)", list(seen), [("/own", None), ("/own", "1"), ("/own", "2")])
            seen.clear()

        relay = client.get(base_url + "/relay", timeout=30)
        ok &= check("GET /relay status", relay.status_code, 500)
        ok &= check("GET /relay Error-Claim", relay.headers.get("Error-Claim"), "unclaimed")
        with seen_lock:
            ok &= check("GET /relay attempts", [s for s in seen if s[0] == "/relay"], [("/relay", None)])
    server.shutdown()

    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    # The test's own calls are the root CLIENT spans; /relay's call to /own
    # has /relay's server span as its parent.
    outer = [s for s in spans if s.kind is SpanKind.CLIENT and s.parent is None]
    ok &= check(
        "client spans' error_ownership.retry.decision",
        decisions(outer),
        ["retried", "retried", "exhausted", "suppressed_unclaimed"],
    )
    servers = {
        (s.attributes or {}).get("error_ownership.claim.sent"): (s.attributes or {}).get("error_ownership.claim.reason")
        for s in spans
        if s.kind is SpanKind.SERVER
    }
    ok &= check("server spans' claim and reason", servers, {"claimed": "own", "unclaimed": "propagated"})
    print("artifact test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
