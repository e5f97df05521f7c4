# SPDX-License-Identifier: Apache-2.0

"""hints.json: the hint client against a real hints server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import load
from hintserver import HintServer

from errorownership_hooks import Limits
from errorownership_hooks.hints import HintClient

V = load("hints.json")


@pytest.fixture
def server() -> Iterator[HintServer]:
    s = HintServer()
    yield s
    s.close()


def doc(name: str) -> str:
    return json.dumps(V["documents"][name])


def ask(c: HintClient, q: dict[str, Any]) -> None:
    got = c.mode(q["operation"], q["peer"], q.get("peer_operation", "")).value
    assert got == q["want"], f"{q.get('name')}: mode({q['operation']!r}, {q['peer']!r}, {q.get('peer_operation')!r})"


def limits(d: dict[str, float]) -> Limits:
    return Limits(d["ratio"], d["min_retries_per_second"])


@pytest.mark.parametrize(
    "query,document,budget",
    [(q, m["document"], m["budget"]) for m in V["modes"] for q in m["queries"]],
    ids=[f"{m['document']}: {q['name']}" for m in V["modes"] for q in m["queries"]],
)
def test_modes(server: HintServer, query: dict[str, Any], document: str, budget: dict[str, float]) -> None:
    server.serve(200, doc(document))
    c = HintClient(server.url, "checkout")
    _, err = c.refresh()
    assert err is None
    ask(c, query)
    assert c.budget_limits() == limits(budget)


GARBAGE = V["garbage"]["cases"]


@pytest.mark.parametrize("tc", GARBAGE, ids=[c["name"] for c in GARBAGE])
def test_garbage(server: HintServer, tc: dict[str, Any]) -> None:
    server.serve(200, doc("sample"))
    c = HintClient(server.url, "checkout")
    assert c.refresh()[1] is None
    server.serve(tc["status"], tc["body"])
    nxt, err = c.refresh()
    assert err is not None, "accepted"
    assert nxt == 1.0
    ask(c, {"operation": "POST /checkout", "peer": "recommendations", "want": "fail_open"})


ACCEPTED = V["accepted"]["cases"]


@pytest.mark.parametrize("tc", ACCEPTED, ids=[c["name"] for c in ACCEPTED])
def test_accepted(server: HintServer, tc: dict[str, Any]) -> None:
    server.serve(200, tc["body"])
    c = HintClient(server.url, "checkout")
    assert c.refresh()[1] is None
    ask(c, tc["query"])
    assert c.budget_limits() == limits(tc["budget"])


POLL = V["poll_after"]["cases"]


@pytest.mark.parametrize("tc", POLL, ids=[c["name"] for c in POLL])
def test_poll_after(server: HintServer, tc: dict[str, Any]) -> None:
    d = dict(V["documents"]["sample"])
    d["ttl_seconds"] = tc["ttl_seconds"]
    server.serve(200, json.dumps(d), {"Cache-Control": tc["cache_control"]} if tc["cache_control"] else None)
    nxt, err = HintClient(server.url, "checkout").refresh()
    assert err is None
    assert nxt == float(tc["want_seconds"])


def test_backoff(server: HintServer) -> None:
    c = HintClient(server.url, "checkout")

    def round_() -> None:
        server.serve(503, "down")
        for i, want in enumerate(V["backoff"]["after_failures_seconds"]):
            nxt, err = c.refresh()
            assert err is not None and nxt == float(want), f"failure {i + 1}"

    round_()
    server.serve(200, doc("sample"))
    assert c.refresh()[1] is None
    round_()  # a good answer started the count again


MAX_ETAG = V["etag"]["max_etag_bytes"]


@pytest.mark.parametrize(
    "etag,kept",
    [('"v1"', True), ('"' + "a" * (MAX_ETAG - 2) + '"', True), ('"' + "a" * (MAX_ETAG - 1) + '"', False)],
    ids=["an ETag is sent back", "an ETag of the longest length kept", "an ETag one byte longer is not"],
)
def test_etag(server: HintServer, etag: str, kept: bool) -> None:
    server.serve(200, doc("sample"), {"ETag": etag})
    c = HintClient(server.url, "checkout")
    assert c.refresh()[1] is None
    if not kept:
        assert c.refresh()[1] is None
        assert server.last_inm is None
        return
    server.serve(304, "", {"Cache-Control": "max-age=9"})
    nxt, err = c.refresh()
    assert err is None and server.last_inm == etag and nxt == 9.0
    ask(c, {"operation": "POST /checkout", "peer": "recommendations", "want": "fail_open"})
    server.serve(304, "")
    nxt, err = c.refresh()
    assert err is None and nxt == 30.0  # the kept document's ttl


def test_stale(server: HintServer) -> None:
    now = [1_800_000_000.0]
    c = HintClient(server.url, "checkout", clock=lambda: now[0])
    default = limits(V["stale"]["default_budget"])
    q = {"operation": "POST /checkout", "peer": "recommendations"}
    ask(c, {**q, "want": "unknown"})
    assert c.budget_limits() == default
    server.serve(200, doc("sample"))
    assert c.refresh()[1] is None
    server.serve(503, "down")
    now[0] += V["stale"]["max_stale_seconds"] - 1
    c.refresh()
    ask(c, {**q, "want": "fail_open"})
    now[0] += 2
    ask(c, {**q, "want": "unknown"})
    assert c.budget_limits() == default
