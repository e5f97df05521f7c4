# SPDX-License-Identifier: Apache-2.0

"""claim.json, retry.json, budget.json, claim_values.json, routes.json."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import load

from errorownership_hooks import (
    Claim,
    Ledger,
    Limits,
    Outcome,
    RetryBudget,
    claim_of_values,
    decide_retry,
    parse_claim,
    parse_mode,
    parse_retry_decision,
)
from errorownership_hooks.hints import match_operation


def cases(name: str, key: str = "name") -> Any:
    cs = load(name)["cases"]
    return pytest.mark.parametrize("tc", cs, ids=[c[key] for c in cs])


@cases("claim.json")
def test_claim(tc: dict[str, Any]) -> None:
    ledger = Ledger()
    for c in tc.get("calls", []):
        call = ledger.begin(c["peer_service"])
        if c.get("in_flight"):
            continue
        ledger.end(
            call,
            Outcome(
                peer_service=c["peer_service"],
                failed=c.get("failed", False),
                received=parse_claim(c.get("received", "")),
                decision=parse_retry_decision(c.get("decision", "")),
                in_flight=c.get("cut_short", False),
            ),
        )
    modes = tc.get("modes", {})
    claim, reason = ledger.decide(lambda peer, _op: parse_mode(modes.get(peer)), tc.get("timed_out", False))
    assert (claim.value, reason.value) == (tc["want"]["claim"], tc["want"]["reason"])


@cases("retry.json")
def test_retry(tc: dict[str, Any]) -> None:
    b: RetryBudget | None
    if tc["budget"] == "tokens":
        b = RetryBudget(Limits(0, 0.1))  # one retry per 10 s
    elif tc["budget"] == "empty":
        b = RetryBudget(Limits(0, 0))
    elif tc["budget"] == "none":
        b = None
    else:
        raise AssertionError(tc["budget"])
    before = b.available() if b is not None else 0
    got = decide_retry(parse_claim(tc["received"]), tc["has_policy"], tc["attempts_left"], b)
    assert got.value == tc["want"]
    withdrawn = b is not None and b.available() < before
    assert withdrawn == tc["withdrawn"]


@cases("budget.json")
def test_budget(tc: dict[str, Any]) -> None:
    now = [1_800_000_000 * 10**9]
    lim = tc["limits"]
    kwargs: dict[str, Any] = {"clock": lambda: now[0]}
    if tc.get("window_ms"):
        kwargs["window"] = tc["window_ms"] / 1000
    b = RetryBudget(Limits(lim["ratio"], lim["min_retries_per_second"]), **kwargs)
    start = now[0]
    for i, s in enumerate(tc["steps"]):
        now[0] = start + s["at_ms"] * 10**6
        op = s["op"]
        if op == "deposit":
            for _ in range(s["times"]):
                b.deposit()
        elif op == "withdraw":
            for n in range(s["times"]):
                assert b.try_withdraw() is s["want"], f"step {i} at {s['at_ms']} ms: withdrawal {n + 1}"
        elif op == "available":
            assert b.available() == s["want"], f"step {i} at {s['at_ms']} ms"
        elif op == "set_limits":
            b.set_limits(Limits(s["ratio"], s["min_retries_per_second"]))
        else:
            raise AssertionError(op)


@cases("claim_values.json")
def test_claim_values(tc: dict[str, Any]) -> None:
    assert claim_of_values(tc["values"]).value == tc["want"]
    # The same through bytes, as the wire carries them.
    assert claim_of_values([v.encode("utf-8") for v in tc["values"]]).value == tc["want"]


@cases("routes.json", key="framework")
def test_routes(tc: dict[str, Any]) -> None:
    for op in tc["matches"]:
        assert match_operation(tc["pattern"], op), f"{tc['pattern']!r} does not match {op!r}"
    for op in tc["misses"]:
        assert not match_operation(tc["pattern"], op), f"{tc['pattern']!r} matches {op!r}"


def test_claim_enum_spellings() -> None:
    assert str(Claim.CLAIMED) == "claimed" and parse_claim("UNCLAIMED") is Claim.UNCLAIMED
    assert parse_claim("claımed") is Claim.MISSING
