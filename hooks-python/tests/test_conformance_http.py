# SPDX-License-Identifier: Apache-2.0

"""client.json (requests, httpx sync and async) and server.json (WSGI under
wsgiref, ASGI under uvicorn), under the OpenTelemetry instrumentations."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import pytest
import uvicorn
from conftest import StaticHints, hook_attrs, load
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware as OtelASGI
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware as OtelWSGI
from opentelemetry.trace import SpanKind

import errorownership_hooks.httpx as eo_httpx
import errorownership_hooks.requests as eo_requests
from errorownership_hooks import Backoff, Limits, RetryBudget
from errorownership_hooks.asgi import ErrorOwnershipMiddleware as ASGIHooks
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware as WSGIHooks

CLIENT = load("client.json")["cases"]
SERVER = load("server.json")["cases"]
FAST = Backoff(0, 0)


def _opts(tc: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = {"backoff": FAST, "max_attempts": tc.get("max_attempts", 3)}
    if tc.get("budget"):
        o["budget"] = RetryBudget(Limits(tc["budget"]["ratio"], tc["budget"]["min_retries_per_second"]))
    return o


def _call(kind: str, tc: dict[str, Any], url: str) -> int:
    kw: dict[str, Any] = {"headers": tc.get("headers") or {}}
    if tc.get("body") is not None:
        kw["content" if kind != "requests" else "data"] = tc["body"].encode()
    if kind == "requests":
        with eo_requests.Session(**_opts(tc)) as s:
            return s.request(tc["method"], url, **kw).status_code
    if kind == "httpx":
        with httpx.Client(transport=eo_httpx.Transport(**_opts(tc))) as c:
            return c.request(tc["method"], url, **kw).status_code

    async def run() -> int:
        async with httpx.AsyncClient(transport=eo_httpx.AsyncTransport(**_opts(tc))) as c:
            return (await c.request(tc["method"], url, **kw)).status_code

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["requests", "httpx", "httpx-async"])
@pytest.mark.parametrize("tc", CLIENT, ids=[c["name"] for c in CLIENT])
def test_client(tc: dict[str, Any], kind: str, spans: Any, callee_factory: Any) -> None:
    callee = callee_factory(tc["responses"])
    status = _call(kind, tc, callee.url + "/items/1")
    want = tc["want"]
    assert status == want["status"]
    assert callee.requests == want["requests"]
    if "bodies" in want:
        assert callee.bodies == want["bodies"]
    client_spans = sorted(
        (s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT), key=lambda s: s.start_time
    )
    assert [hook_attrs(s) for s in client_spans] == want["spans"]


# ---------------------------------------------------------------------------
# server.json


def _handler_calls(case: dict[str, Any], callees: list[Any]) -> list[tuple[str, str]]:
    return [
        (c.get("method", "GET"), callee.url + "/dep") for c, callee in zip(case.get("calls", []), callees, strict=True)
    ]


def _server_hints(case: dict[str, Any], callees: list[Any]) -> StaticHints:
    return StaticHints(
        {callee.address: c["mode"] for c, callee in zip(case.get("calls", []), callees, strict=True) if c.get("mode")}
    )


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _get(port: int) -> tuple[int, list[str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/checkout")
        r = conn.getresponse()
        r.read()
        return r.status, r.headers.get_all("Error-Claim") or []
    finally:
        conn.close()


def _check_server(case: dict[str, Any], status: int, claims: list[str], spans: Any) -> None:
    assert status == case["status"]
    want = case["want"]
    assert claims == ([] if want["header"] is None else [want["header"]])
    server_spans = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert len(server_spans) == 1
    assert hook_attrs(server_spans[0]) == want["span"]


@pytest.mark.parametrize("placement", ["inside", "outside"])
@pytest.mark.parametrize("tc", SERVER, ids=[c["name"] for c in SERVER])
def test_server_wsgi(tc: dict[str, Any], placement: str, spans: Any, callee_factory: Any) -> None:
    """The middleware inside the instrumentation's, and outside it, where
    opentelemetry-instrument puts Flask's (it wraps app.wsgi_app when the
    app is made)."""
    callees = [callee_factory(c["responses"]) for c in tc.get("calls", [])]
    calls = _handler_calls(tc, callees)
    session = eo_requests.Session(backoff=FAST)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        for method, url in calls:
            session.request(method, url)
        headers = [("Content-Type", "text/plain")] + [("Error-Claim", v) for v in tc.get("set_claim", [])]
        start_response(f"{tc['status']} X", headers)
        return [b"done"]

    hints = _server_hints(tc, callees)
    served = OtelWSGI(WSGIHooks(app, hints=hints)) if placement == "inside" else WSGIHooks(OtelWSGI(app), hints=hints)
    httpd = make_server("127.0.0.1", 0, served, WSGIServer, _QuietHandler)
    t = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    t.start()
    try:
        status, claims = _get(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        session.close()
    _check_server(tc, status, claims, spans)


@pytest.fixture(scope="module")
def asgi_server() -> Iterator[tuple[int, dict[str, Any]]]:
    """One uvicorn server for every case; the case to play is set in state."""
    state: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        tc, calls = state["tc"], state["calls"]
        async with httpx.AsyncClient(transport=eo_httpx.AsyncTransport(backoff=FAST)) as c:
            for method, url in calls:
                await c.request(method, url)
        headers = [(b"content-type", b"text/plain")] + [(b"error-claim", v.encode()) for v in tc.get("set_claim", [])]
        await send({"type": "http.response.start", "status": tc["status"], "headers": headers})
        await send({"type": "http.response.body", "body": b"done"})

    async def hooked(scope: Any, receive: Any, send: Any) -> None:
        await state["app"](scope, receive, send)

    state["inner"] = app
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(hooked, log_level="error", lifespan="off"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    yield port, state
    server.should_exit = True
    t.join(5)


@pytest.mark.parametrize("tc", SERVER, ids=[c["name"] for c in SERVER])
@pytest.mark.parametrize("placement", ["inside", "outside"])
def test_server_asgi(
    tc: dict[str, Any], placement: str, spans: Any, callee_factory: Any, asgi_server: tuple[int, dict[str, Any]]
) -> None:
    """The middleware inside the instrumentation's, and outside it."""
    port, state = asgi_server
    callees = [callee_factory(c["responses"]) for c in tc.get("calls", [])]
    state["tc"], state["calls"] = tc, _handler_calls(tc, callees)
    hints = _server_hints(tc, callees)
    if placement == "inside":
        state["app"] = OtelASGI(ASGIHooks(state["inner"], hints=hints))
    else:
        state["app"] = ASGIHooks(OtelASGI(state["inner"]), hints=hints)
    status, claims = _get(port)
    for _ in range(500):  # the server span ends just after the body is sent
        if any(s.kind is SpanKind.SERVER for s in spans.get_finished_spans()):
            break
        time.sleep(0.01)
    _check_server(tc, status, claims, spans)
