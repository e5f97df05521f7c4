# SPDX-License-Identifier: Apache-2.0

"""Ported from the Go hooks' hostile tests: the hooks never fail a request,
nor read a claim into one, because of what a callee or a hints server sends."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
from conftest import hook_attrs, load
from hintserver import HintServer
from opentelemetry.trace import SpanKind

import errorownership_hooks.httpx as eo_httpx
import errorownership_hooks.requests as eo_requests
from errorownership_hooks import Backoff, Ledger, ledger_scope
from errorownership_hooks.hints import HintClient

MIB = 1 << 20


def headers(extra: str) -> bytes:
    return ("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n" + extra + "\r\n").encode(
        "latin-1"
    )


def repeat(name: str, value: str, n: int) -> str:
    return "".join(f"{name}: {value}\r\n" for _ in range(n))


HOSTILE = [
    ("claims everything", headers("Error-Claim: claimed\r\n"), "claimed"),
    ("unclaims everything", headers("Error-Claim: unclaimed\r\n"), "unclaimed"),
    ("an invalid value", headers("Error-Claim: yes-please\r\n"), "missing"),
    (
        "invalid UTF-8",
        b"HTTP/1.1 503 X\r\nContent-Length: 0\r\nConnection: close\r\nError-Claim: \xff\xfe\xfd\r\n\r\n",
        "missing",
    ),
    (
        "claimed, then invalid UTF-8",
        b"HTTP/1.1 503 X\r\nContent-Length: 0\r\nConnection: close\r\nError-Claim: claimed\xc3\x28\r\n\r\n",
        "missing",
    ),
    ("claimed with trailing spaces", headers("Error-Claim: claimed   \r\n"), "claimed"),
    ("a 1 MiB claim", headers("Error-Claim: " + "claimed" * (MIB // 7) + "\r\n"), "missing"),
    ("100 repeated claims", headers(repeat("Error-Claim", "claimed", 100)), "missing"),
    ("claimed and unclaimed", headers("Error-Claim: claimed\r\nerror-claim: unclaimed\r\n"), "missing"),
    ("a comma list", headers("Error-Claim: claimed, unclaimed\r\n"), "missing"),
    ("an empty claim", headers("Error-Claim:\r\n"), "missing"),
    ("an odd letter case", headers("eRRoR-cLaIm: CLAIMED\r\n"), "claimed"),
    ("90 junk headers", headers(repeat("X-Junk", "j", 90) + "Error-Claim: claimed\r\n"), "claimed"),
]


class RawCallee:
    """Answers every connection with the same raw bytes."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/x"
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(self.raw)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.stopped = True
        self.sock.close()


@pytest.fixture
def raw_callee() -> Iterator[Any]:
    made: list[RawCallee] = []

    def make(raw: bytes) -> RawCallee:
        made.append(RawCallee(raw))
        return made[-1]

    yield make
    for c in made:
        c.close()


def _received(spans: Any) -> list[Any]:
    return [
        hook_attrs(s).get("error_ownership.claim.received")
        for s in spans.get_finished_spans()
        if s.kind is SpanKind.CLIENT
    ]


@pytest.mark.parametrize("kind", ["requests", "httpx"])
@pytest.mark.parametrize("name,raw,want", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_callee(name: str, raw: bytes, want: str, kind: str, raw_callee: Any, spans: Any) -> None:
    callee = raw_callee(raw)
    with ledger_scope(Ledger()) as ledger:
        try:
            if kind == "requests":
                with eo_requests.Session(max_attempts=1) as s:
                    status: int | None = s.get(callee.url, timeout=10).status_code
            else:
                with httpx.Client(transport=eo_httpx.Transport(max_attempts=1), timeout=10) as c:
                    status = c.get(callee.url).status_code
        except (httpx.HTTPError, OSError, ValueError) as e:
            # A client library may refuse a hostile answer outright; the hooks
            # must then record an unanswered failure, never a claim.
            status = None
            assert not isinstance(e, AssertionError)
    outs = ledger.outcomes()
    assert len(outs) == 1 and outs[0].failed and not outs[0].in_flight
    if status is not None:
        assert status == 503
        assert outs[0].received.value == want
        assert _received(spans) == [want]
    else:
        assert outs[0].received.value == "missing"


def test_unreachable_callee_is_retried_then_raised(spans: Any) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{s.getsockname()[1]}/x"
    s.close()  # nothing listens there
    with (
        ledger_scope() as ledger,
        eo_requests.Session(backoff=Backoff(0, 0)) as sess,
        pytest.raises(requests.exceptions.ConnectionError),
    ):
        sess.get(url, timeout=5)
    (out,) = ledger.outcomes()
    assert out.failed and out.decision.value == "exhausted" and out.received.value == "missing"
    assert [
        hook_attrs(x).get("error_ownership.retry.decision")
        for x in spans.get_finished_spans()
        if x.kind is SpanKind.CLIENT
    ] == [
        "retried",
        "retried",
        "exhausted",
    ]


# ---------------------------------------------------------------------------
# A hostile hints server

SAMPLE = json.dumps(load("hints.json")["documents"]["sample"])


def _with(fields: str) -> str:
    return '{"version":1,"service":"checkout",' + fields + ',"edges":[]}'


HOSTILE_HINTS: list[tuple[str, int, str | bytes]] = [
    ("500", 500, "boom"),
    ("404", 404, "nope"),
    ("304 to a request without If-None-Match", 304, ""),
    ("not JSON", 200, "<html>oops</html>"),
    ("empty", 200, ""),
    ("null", 200, "null"),
    ("a JSON string", 200, '"hints"'),
    ("truncated", 200, SAMPLE[: len(SAMPLE) // 2]),
    ("100,000 brackets deep", 200, "[" * 100000),
    ("invalid UTF-8", 200, b'{"version":1,"service":"\xff\xfe","edges":[]}'),
    ("wrong version", 200, '{"version":2,"service":"checkout","edges":[]}'),
    ("no version", 200, '{"service":"checkout","edges":[]}'),
    ("a huge version", 200, '{"version":1e999,"service":"checkout","edges":[]}'),
    ("another service", 200, '{"version":1,"service":"payments","edges":[]}'),
    ("a negative ttl", 200, _with('"ttl_seconds":-30')),
    ("a ttl over int64", 200, _with('"ttl_seconds":99999999999999999999')),
    ("a fractional ttl", 200, _with('"ttl_seconds":0.5')),
    ("a ratio over 1", 200, _with('"retry_budget":{"ratio":5,"min_retries_per_second":10}')),
    ("a negative ratio", 200, _with('"retry_budget":{"ratio":-0.1,"min_retries_per_second":10}')),
    ("a ratio of 1e308", 200, _with('"retry_budget":{"ratio":1e308,"min_retries_per_second":10}')),
    ("a NaN ratio", 200, _with('"retry_budget":{"ratio":NaN,"min_retries_per_second":10}')),
    ("a negative floor", 200, _with('"retry_budget":{"ratio":0.1,"min_retries_per_second":-1}')),
    ("a floor of 1e308", 200, _with('"retry_budget":{"ratio":0.1,"min_retries_per_second":1e308}')),
    ("a floor of a million retries a second", 200, _with('"retry_budget":{"ratio":0.1,"min_retries_per_second":1e6}')),
    ("a budget of strings", 200, _with('"retry_budget":{"ratio":"all","min_retries_per_second":"many"}')),
    ("edges as an object", 200, '{"version":1,"service":"checkout","edges":{"a":1}}'),
    ("an edge of numbers", 200, '{"version":1,"service":"checkout","edges":[{"operation":1,"mode":2}]}'),
    ("a 2 MiB document", 200, " " * (2 << 20)),
]


@pytest.mark.parametrize("name,status,body", HOSTILE_HINTS, ids=[h[0] for h in HOSTILE_HINTS])
def test_hostile_hints_server(name: str, status: int, body: str | bytes) -> None:
    s = HintServer()
    try:
        s.serve(200, SAMPLE)
        c = HintClient(s.url, "checkout")
        assert c.refresh()[1] is None
        s.serve(status, body)
        nxt, err = c.refresh()
        assert err is not None
        assert nxt == 1.0
        # The last good hints stand.
        assert c.mode("POST /checkout", "recommendations", "").value == "fail_open"
        assert c.budget_limits().ratio == 0.2
    finally:
        s.close()


def test_hints_server_that_stalls_is_cut_off() -> None:
    s = HintServer()
    try:
        s.serve(200, SAMPLE)
        s.trickle = 0.05  # one byte every 50 ms: about 30 s for the document
        c = HintClient(s.url, "checkout", fetch_timeout=0.5)
        nxt, err = c.refresh()
        assert err is not None and nxt == 1.0
        assert c.mode("POST /checkout", "recommendations", "").value == "unknown"
    finally:
        s.close()


def test_mode_never_waits_on_a_fetch() -> None:
    s = HintServer()
    try:
        s.serve(200, SAMPLE)
        s.delay = 3.0
        c = HintClient.start(s.url, "checkout")
        # The poller is blocked in its fetch; the hooks' questions are not.
        assert c.mode("POST /checkout", "recommendations", "").value == "unknown"
        assert c.budget_limits().ratio == 0.1
        assert c._thread is not None and c._thread.daemon
        c.stop()
    finally:
        s.close()


def test_hints_server_down() -> None:
    s = HintServer()
    url = s.url
    s.close()
    c = HintClient(url, "checkout")
    nxt, err = c.refresh()
    assert err is not None and nxt == 1.0
    assert c.mode("", "anyone", "").value == "unknown"
