# SPDX-License-Identifier: Apache-2.0

"""A service with no error-ownership code, run by tests/test_zerocode.py
under ``opentelemetry-instrument`` in .venv-zerocode (the built wheel and
the instrumentations, Makefile: hooks-deps): whatever the hooks do here,
the instrumentor does. The first line it prints is ``READY <port>``.

    app.py flask       a Flask app (werkzeug, threaded)
    app.py starlette   a Starlette app (uvicorn)
    app.py django      a Django project (DJANGO_SETTINGS_MODULE=djsettings)
                       under werkzeug, threaded
    app.py grpc        a grpcio server (generic handlers with bytes), and
                       the HTTP paths /_spans and /_ready (grpc_port: its
                       port) on a server no instrumentation traces
    app.py bench URL   the overhead benchmark's Flask service: GET /call
                       calls URL once through requests, GET /fail answers 500
    app.py callee      the benchmark's callee (run without instrumentation)

The servers answer:
    GET /checkout   makes the calls the X-Plan header lists ({"client":
                    requests|httpx|httpx-async|urllib|urllib3, "calls":
                    [[method, url]], "status": n, "set_claim": [...]}),
                    then answers status, with Error-Claim set to each of
                    set_claim first.
    POST /_client   one call ({"kind", "method", "url", "headers", "body"});
                    answers {"status": n}.
    GET /_spans     the spans finished since the last /_spans, with the
                    attributes the hooks set on each (attrspy).
    GET /_ready     where the hooks were imported from, and whether the
                    hint client has hints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError

import httpx
import requests
import urllib3
from attrspy import AttributeSpy
from grpcanswer import answer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import errorownership_hooks

EXPORTER = InMemorySpanExporter()
SPY = AttributeSpy()


def capture() -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), f"no SDK under opentelemetry-instrument: {provider!r}"
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    SPY.install()


def call(kind: str, method: str, url: str, headers: dict[str, str], body: str | None) -> int:
    data = body.encode() if body is not None else None
    if kind == "requests":
        return requests.request(method, url, headers=headers, data=data, timeout=10).status_code
    if kind == "httpx":
        with httpx.Client() as c:
            return c.request(method, url, headers=headers, content=data).status_code
    if kind == "httpx-async":

        async def run() -> int:
            async with httpx.AsyncClient() as c:
                return (await c.request(method, url, headers=headers, content=data)).status_code

        return asyncio.run(run())
    if kind == "urllib":
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return int(r.status)
        except HTTPError as e:
            e.close()
            return int(e.code)
    if kind == "urllib3":
        return int(urllib3.request(method, url, headers=headers, body=data, timeout=10).status)
    raise ValueError(f"unknown client kind {kind!r}")


def spans() -> list[dict[str, Any]]:
    out = []
    for s in EXPORTER.get_finished_spans():
        try:
            attrs: Any = SPY.hooks_set(s)
        except AssertionError as e:
            attrs = {"error": str(e)}
        out.append({"kind": s.kind.name, "name": s.name, "start": s.start_time, "attrs": attrs})
    EXPORTER.clear()
    SPY.clear()
    return sorted(out, key=lambda s: s["start"])


def ready() -> dict[str, Any]:
    from errorownership_hooks.instrumentor import ErrorOwnershipInstrumentor

    client = ErrorOwnershipInstrumentor()._client
    return {
        "file": errorownership_hooks.__file__,
        "prefix": sys.prefix,
        "hints": client is not None and client.hints() is not None,
    }


def plan_calls(plan: dict[str, Any]) -> None:
    for method, url in plan.get("calls", []):
        with contextlib.suppress(Exception):  # the answer is what the test looks at
            call(plan["client"], method, url, {}, None)


def flask_app() -> Any:
    from flask import Flask, Response, request

    app = Flask(__name__)

    @app.get("/checkout")
    def checkout() -> Response:
        plan = json.loads(request.headers["X-Plan"])
        plan_calls(plan)
        headers = [("Error-Claim", v) for v in plan.get("set_claim", [])]
        return Response("done", status=plan["status"], headers=headers)

    @app.post("/_client")
    def client() -> Any:
        c = request.get_json()
        return {"status": call(c["kind"], c["method"], c["url"], c.get("headers") or {}, c.get("body"))}

    @app.get("/_spans")
    def _spans() -> Any:
        return json.dumps(spans())

    @app.get("/_ready")
    def _ready() -> Any:
        return ready()

    return app


def serve_flask() -> None:
    from werkzeug.serving import make_server

    capture()
    server = make_server("127.0.0.1", 0, flask_app(), threaded=True)
    print(f"READY {server.server_port}", flush=True)
    server.serve_forever()


def serve_starlette() -> None:
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    capture()

    async def checkout(request: Request) -> Response:
        plan = json.loads(request.headers["x-plan"])
        if plan["client"] == "httpx-async":
            async with httpx.AsyncClient() as c:
                for method, url in plan.get("calls", []):
                    with contextlib.suppress(Exception):
                        await c.request(method, url)
        else:
            await asyncio.to_thread(plan_calls, plan)
        r = Response("done", status_code=plan["status"])
        for v in plan.get("set_claim", []):
            r.headers.append("Error-Claim", v)
        return r

    async def _spans(request: Request) -> Response:
        return Response(json.dumps(spans()), media_type="application/json")

    async def _ready(request: Request) -> Response:
        return JSONResponse(ready())

    app = Starlette(routes=[Route("/checkout", checkout), Route("/_spans", _spans), Route("/_ready", _ready)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn serves
    print(f"READY {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off")).run(sockets=[sock])


def serve_grpc() -> None:
    """/test.Svc/checkout makes a call to each address its x-plan metadata
    lists ({"calls": [address], "code": name, "set_claim": value}), then
    answers code, with the error-claim trailer set to set_claim first;
    /test.Svc/client makes one call to the address it is sent and answers
    the code's name. Each call is /test.Svc/Call on a channel per address."""
    from concurrent import futures

    import grpc

    capture()
    channels: dict[str, grpc.Channel] = {}
    lock = threading.Lock()

    def call_once(address: str) -> str:
        with lock:
            ch = channels.get(address) or channels.setdefault(address, grpc.insecure_channel(address))
        try:
            ch.unary_unary("/test.Svc/Call")(b"x", timeout=10)
        except grpc.RpcError as e:
            return str(e.code().name)
        return "OK"

    def checkout(request: bytes, context: grpc.ServicerContext) -> bytes:
        plan = json.loads(dict(context.invocation_metadata())["x-plan"])
        for address in plan.get("calls", []):
            call_once(address)
        return answer(context, plan["code"], plan.get("set_claim"), "the plan's answer")

    def client(request: bytes, context: grpc.ServicerContext) -> bytes:
        return call_once(request.decode()).encode()

    methods = {"checkout": checkout, "client": client}
    handler = grpc.method_handlers_generic_handler(
        "test.Svc", {k: grpc.unary_unary_rpc_method_handler(f) for k, f in methods.items()}
    )
    server = grpc.server(futures.ThreadPoolExecutor(8))
    server.add_generic_rpc_handlers((handler,))
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    class Control(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps(spans() if self.path == "/_spans" else {**ready(), "grpc_port": grpc_port}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    print(f"READY {control.server_address[1]}", flush=True)
    control.serve_forever()


# Django's URLs (djsettings: ROOT_URLCONF), filled by serve_django.
urlpatterns: list[Any] = []


def serve_django() -> None:
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpRequest, HttpResponse, JsonResponse
    from django.urls import path
    from werkzeug.serving import make_server

    capture()

    def checkout(request: HttpRequest) -> HttpResponse:
        plan = json.loads(request.headers["X-Plan"])
        plan_calls(plan)
        r = HttpResponse("done", status=plan["status"])
        if plan.get("set_claim"):
            # Django keeps one value a header: several relayed claims are joined.
            r["Error-Claim"] = ", ".join(plan["set_claim"])
        return r

    def _spans(request: HttpRequest) -> HttpResponse:
        return HttpResponse(json.dumps(spans()), content_type="application/json")

    def _ready(request: HttpRequest) -> HttpResponse:
        return JsonResponse(ready())

    urlpatterns[:] = [path("checkout", checkout), path("_spans", _spans), path("_ready", _ready)]
    server = make_server("127.0.0.1", 0, get_wsgi_application(), threaded=True)
    print(f"READY {server.server_port}", flush=True)
    server.serve_forever()


class _Callee(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go in two writes: without this, the second waits on
    # the client's delayed ACK (40 ms), which the benchmark would measure.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def serve_callee() -> None:
    """The benchmark's callee, shared by its two services: not instrumented."""
    callee = ThreadingHTTPServer(("127.0.0.1", 0), _Callee)
    callee.daemon_threads = True
    print(f"READY {callee.server_address[1]}", flush=True)
    callee.serve_forever()


def serve_bench(callee_url: str) -> None:
    """The benchmark's service: GET /call makes one requests call to the
    callee and answers 200; GET /fail answers 500 (a claim is decided).
    Nothing captures its spans (the SDK makes them, no exporter)."""
    import logging

    from flask import Flask
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Handler(WSGIRequestHandler):
        disable_nagle_algorithm = True  # as _Callee: no delayed ACK measured

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Flask(__name__)
    session = requests.Session()

    @app.get("/call")
    def call_route() -> Any:
        session.get(callee_url, timeout=10).close()
        return "done"

    @app.get("/fail")
    def fail_route() -> Any:
        return "failed", 500

    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Handler)
    print(f"READY {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "flask":
        serve_flask()
    elif mode == "starlette":
        serve_starlette()
    elif mode == "django":
        serve_django()
    elif mode == "grpc":
        serve_grpc()
    elif mode == "callee":
        serve_callee()
    elif mode == "bench":
        serve_bench(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
