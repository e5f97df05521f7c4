# SPDX-License-Identifier: Apache-2.0

"""The README's snippets are regions of examples/ (and of the newcomer
service, which e2e/newcomer_python_test.go runs); make lint checks
that the README shows them as they are here. Every example compiles; those
whose frameworks the test extra installs also run: each server answers a
request through its hooks, each client calls a server on 127.0.0.1, under
the OpenTelemetry SDK of conftest. programmatic.py needs the Flask
instrumentation and the OTLP exporter, which the tests do not install: it
is compiled only."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from wsgiref.util import setup_testing_defaults

import grpc
import httpx
import pytest
from conftest import hook_attrs, load
from hintserver import HintServer
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware as AsgiInstrumentation
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware as WsgiInstrumentation
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))

CLAIM_SENT = "error_ownership.claim.sent"
CLAIM_REASON = "error_ownership.claim.reason"
ATTEMPT = "error_ownership.retry.attempt"


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_compiles(path: Path) -> None:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")


class Examples:
    """Runs example modules as their docstrings say, with HINTS_URL on a
    hints server and OTEL_SERVICE_NAME set."""

    def __init__(self) -> None:
        self.hints = HintServer()
        # The service the hints server answers for.
        self.service = "checkout"
        self.hints.serve(200, json.dumps(load("hints.json")["documents"]["sample"]))
        self.modules: list[ModuleType] = []
        self.cached: dict[str, ModuleType] = {}

    def get(self, name: str) -> ModuleType:
        """The example, run once: Django can be configured only once in a
        process."""
        if name not in self.cached:
            self.cached[name] = self.run(name)
        return self.cached[name]

    def run(self, name: str, **env: str) -> ModuleType:
        """The example, run anew with env added to the environment."""
        # Registered under its name before it runs: Django imports
        # ROOT_URLCONF (the module itself) by that name.
        modname = f"example_{name}_{len(self.modules)}"
        spec = importlib.util.spec_from_file_location(modname, EXAMPLES_DIR / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        self.modules.append(mod)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HINTS_URL", self.hints.url)
            mp.setenv("OTEL_SERVICE_NAME", self.service)
            for k, v in env.items():
                mp.setenv(k, v)
            spec.loader.exec_module(mod)
        return mod

    def close(self) -> None:
        for mod in self.modules:
            mod.hints.stop()
            sys.modules.pop(mod.__name__, None)
            server = getattr(mod, "server", None)
            if isinstance(server, grpc.Server):
                mod.channel.close()
                server.stop(None)
        self.hints.close()


@pytest.fixture(scope="module")
def examples() -> Iterator[Examples]:
    e = Examples()
    yield e
    e.close()


def server_spans(spans: InMemorySpanExporter) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]


def client_attempts(spans: InMemorySpanExporter) -> list[Any]:
    return [hook_attrs(s).get(ATTEMPT) for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT]


# -- servers: (status, headers) for a GET of path, through the example's
# app under the OpenTelemetry instrumentation of its kind.


def call_wsgi(app: Callable[..., Iterable[bytes]], path: str) -> tuple[int, dict[str, str]]:
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"], _, environ["QUERY_STRING"] = path.partition("?")
    environ["SERVER_NAME"] = environ["HTTP_HOST"] = "127.0.0.1"
    got: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        got["status"], got["headers"] = int(status.split()[0]), dict(headers)
        return lambda _: None

    body = WsgiInstrumentation(app)(environ, start_response)
    try:
        b"".join(body)
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return got["status"], got["headers"]


def flask_app(examples: Examples) -> Any:
    return examples.get("wsgi_flask").app


def django_app(examples: Examples) -> Any:
    return examples.get("wsgi_django").application


def serve_wsgi(app: Callable[[Examples], Any]) -> Callable[[Examples, str], tuple[int, dict[str, str]]]:
    return lambda examples, path: call_wsgi(app(examples), path)


def serve_asgi(examples: Examples, path: str) -> tuple[int, dict[str, str]]:
    async def get() -> httpx.Response:
        app = AsgiInstrumentation(examples.get("asgi_starlette").app)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app, raise_app_exceptions=False), base_url="http://127.0.0.1"
        ) as client:
            return await client.get(path)

    r = asyncio.run(get())
    return r.status_code, dict(r.headers)


SERVERS = {
    "asgi starlette": serve_asgi,
    "wsgi flask": serve_wsgi(flask_app),
    "wsgi django": serve_wsgi(django_app),
}
OWN_FAILURE = {CLAIM_SENT: "claimed", CLAIM_REASON: "own"}


@pytest.mark.parametrize(
    ("server", "path", "status", "claim", "attrs"),
    [
        pytest.param(server, path, status, claim, attrs, id=f"{server}: {name}")
        for server in SERVERS
        for name, path, status, claim, attrs in [
            ("success, no claim", "/work/7", 200, None, {}),
            ("own failure claimed", "/work/7?fail=1", 500, "claimed", OWN_FAILURE),
            ("a handler that raised: own failure claimed", "/work/7?raise=1", 500, "claimed", OWN_FAILURE),
        ]
    ],
)
def test_server_example(
    examples: Examples,
    spans: InMemorySpanExporter,
    server: str,
    path: str,
    status: int,
    claim: str | None,
    attrs: dict[str, str],
) -> None:
    got_status, headers = SERVERS[server](examples, path)
    assert got_status == status
    assert {k.lower(): v for k, v in headers.items()}.get("error-claim") == claim
    (span,) = server_spans(spans)
    assert hook_attrs(span) == attrs


# -- clients

HTTPX_CALLS: dict[str, Callable[[ModuleType, str], Any]] = {
    "sync": lambda mod, url: mod.client.get(url),
    "async": lambda mod, url: asyncio.run(mod.call_async(url)),
}


@pytest.mark.parametrize(
    ("responses", "status", "retry_attempts"),
    [
        pytest.param([{"status": 200}], 200, [None], id="success"),
        pytest.param([{"status": 503}, {"status": 200}], 200, [None, "1"], id="unlabelled 503 retried"),
        pytest.param([{"status": 503, "claim": "unclaimed"}], 503, [None], id="unclaimed 503 not retried"),
    ],
)
@pytest.mark.parametrize("mode", list(HTTPX_CALLS))
def test_httpx_example(
    examples: Examples,
    spans: InMemorySpanExporter,
    callee_factory: Any,
    mode: str,
    responses: list[dict[str, Any]],
    status: int,
    retry_attempts: list[str | None],
) -> None:
    # Each case its own clients: call_async closes the async one.
    mod = examples.run("httpx_client")
    callee = callee_factory(responses)
    r = HTTPX_CALLS[mode](mod, callee.url)
    assert r.status_code == status
    assert callee.requests == retry_attempts
    # One CLIENT span per attempt (opentelemetry-instrumentation-httpx),
    # each with its attempt number.
    assert client_attempts(spans) == list(range(len(retry_attempts)))


@pytest.fixture(scope="module")
def stock(examples: Examples) -> Any:
    """The grpc example twice: a stock service, serving on 127.0.0.1, and a
    caller whose channel dials it."""
    callee = examples.run("grpc_stock")
    port = callee.server.add_insecure_port("127.0.0.1:0")
    callee.server.start()
    return examples.run("grpc_stock", STOCK_ADDR=f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("request_body", "code", "claim", "attempts"),
    [
        pytest.param(b"apples", grpc.StatusCode.OK, None, [0], id="success"),
        pytest.param(b"fail", grpc.StatusCode.INTERNAL, "claimed", [0, 1, 2], id="claimed INTERNAL retried"),
    ],
)
def test_grpc_example(
    stock: Any,
    spans: InMemorySpanExporter,
    request_body: bytes,
    code: grpc.StatusCode,
    claim: str | None,
    attempts: list[int],
) -> None:
    try:
        reply, call = stock.stock_get.with_call(request_body, timeout=10)
        assert reply == b"in stock: " + request_body
        got_code, trailers = call.code(), call.trailing_metadata()
    except grpc.RpcError as e:
        got_code, trailers = e.code(), e.trailing_metadata()
    assert got_code is code
    assert dict(trailers or ()).get("error-claim") == claim
    # Each attempt is a CLIENT span with its number (the OpenTelemetry
    # interceptor between the hooks and their attempt_interceptor) and a
    # SERVER span where the server hooks claimed what they answered.
    assert client_attempts(spans) == attempts
    sent = [hook_attrs(s).get(CLAIM_SENT) for s in server_spans(spans)]
    assert sent == [claim] * len(attempts)


def test_asgi_raising_twice(examples: Examples, spans: InMemorySpanExporter) -> None:
    # The hooks answer an exception with a 500 of their own: each answer is
    # decided afresh, not the claim the one before it carried.
    for _ in range(2):
        status, headers = serve_asgi(examples, "/work/7?raise=1")
        assert (status, headers.get("error-claim")) == (500, "claimed")
        (span,) = server_spans(spans)
        assert hook_attrs(span) == OWN_FAILURE
        spans.clear()
