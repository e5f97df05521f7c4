# SPDX-License-Identifier: Apache-2.0

"""The hint client's polls are never spans: with the requests and httpx
instrumentations active (conftest), and an instrumentation of http.client,
which the client uses, written as contrib's are (it honours the suppression
keys through is_http_instrumentation_enabled). The urllib and urllib3 ones
that opentelemetry-bootstrap adds are run by the newcomer end-to-end test
(e2e/newcomer_python_test.go)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from conftest import load
from hintserver import HintServer
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_http_instrumentation_enabled
from opentelemetry.trace import SpanKind

from errorownership_hooks.hints import HintClient

DOC = json.dumps(load("hints.json")["documents"]["sample"])
TRACER = trace.get_tracer("test_hints_untraced")


@pytest.fixture
def instrumented(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """http.client instrumented for this test only."""
    request = http.client.HTTPConnection.request

    def traced(self: http.client.HTTPConnection, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        if not is_http_instrumentation_enabled():
            return request(self, method, url, *args, **kwargs)
        with TRACER.start_as_current_span(
            method, kind=SpanKind.CLIENT, attributes={"url.full": f"http://{self.host}:{self.port}{url}"}
        ):
            return request(self, method, url, *args, **kwargs)

    monkeypatch.setattr(http.client.HTTPConnection, "request", traced)
    yield


@pytest.fixture
def server() -> Iterator[HintServer]:
    s = HintServer()
    s.serve(200, DOC, {"Cache-Control": "max-age=1"})
    yield s
    s.close()


def _refresh_in_a_span(server: HintServer) -> None:
    c = HintClient(server.url, "checkout")
    with TRACER.start_as_current_span("caller", kind=SpanKind.SERVER):
        _, err = c.refresh()
    assert err is None


def _background(server: HintServer) -> None:
    with TRACER.start_as_current_span("caller", kind=SpanKind.SERVER):
        c = HintClient.start(server.url, "checkout")
    try:
        # Two polls: the first and the revalidation after max-age.
        deadline = time.monotonic() + 30
        while (server.fetches < 2 or c.hints() is None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.hints() is not None and server.fetches >= 2, c.last_error
    finally:
        c.stop()


@pytest.mark.parametrize(
    "poll",
    [_refresh_in_a_span, _background],
    ids=["a refresh in a caller's span", "the background poller started in a caller's span"],
)
def test_poll_is_not_a_span(
    instrumented: None, server: HintServer, spans: Any, poll: Callable[[HintServer], None]
) -> None:
    poll(server)
    assert [s.name for s in spans.get_finished_spans()] == ["caller"]


@pytest.mark.parametrize(
    "call",
    [
        lambda url: _plain_http_client(url),
        lambda url: requests.get(url, timeout=10).content,
    ],
    ids=["http.client", "requests"],
)
def test_other_calls_are_spans(instrumented: None, server: HintServer, spans: Any, call: Callable[[str], Any]) -> None:
    """What makes the test above able to fail: the same request, made
    outside the hint client, is a CLIENT span."""
    call(server.url + "/v1/hints?service=checkout")
    assert [s.kind for s in spans.get_finished_spans()] == [SpanKind.CLIENT]


def _plain_http_client(url: str) -> bytes:
    host, _, rest = url.removeprefix("http://").partition("/")
    conn = http.client.HTTPConnection(host, timeout=10)
    try:
        conn.request("GET", "/" + rest)
        return conn.getresponse().read()
    finally:
        conn.close()
