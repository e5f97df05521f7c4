# SPDX-License-Identifier: Apache-2.0

"""grpc.json: the gRPC interceptors over real grpcio servers on 127.0.0.1,
generic handlers with bytes (no codegen), under the OpenTelemetry gRPC
interceptors."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from conftest import StaticHints, hook_attrs, load
from opentelemetry.instrumentation.grpc import client_interceptor as otel_client
from opentelemetry.instrumentation.grpc import server_interceptor as otel_server
from opentelemetry.instrumentation.grpc.grpcext import intercept_channel as otel_intercept
from opentelemetry.trace import SpanKind
from zerocode.grpcanswer import answer

from errorownership_hooks import Backoff, Limits, RetryBudget
from errorownership_hooks.grpc import ClientInterceptor, ServerInterceptor

V = load("grpc.json")
CLIENT = V["client"]["cases"]
SERVER = V["server"]["cases"]
FAST = Backoff(0, 0)
METHOD = "/test.Svc/Call"


class SentMetadata(grpc.UnaryUnaryClientInterceptor):
    """Records the grpc-previous-rpc-attempts each attempt goes out with.
    grpcio's C core treats the key as its own and does not hand it to a
    Python server's invocation_metadata, so the runner reads it here, at
    the bottom of the client's interceptor chain."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.sent.append(dict(details.metadata or ()).get("grpc-previous-rpc-attempts"))
        return continuation(details, request)


def hooked_channel(
    address: str, recorder: SentMetadata | None = None, **opts: Any
) -> tuple[grpc.Channel, grpc.Channel]:
    hooks = ClientInterceptor(address, backoff=FAST, **opts)
    raw = grpc.insecure_channel(address)
    # The hooks outside, the OpenTelemetry span per attempt inside them, and
    # the hooks' attempt interceptor inside that span.
    inner = grpc.intercept_channel(raw, hooks.attempt_interceptor, recorder or SentMetadata())
    return raw, grpc.intercept_channel(otel_intercept(inner, otel_client()), hooks)


def call(channel: grpc.Channel) -> grpc.StatusCode:
    try:
        channel.unary_unary(METHOD)(b"x", timeout=10)
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


@pytest.mark.parametrize("tc", CLIENT, ids=[c["name"] for c in CLIENT])
def test_client(tc: dict[str, Any], spans: Any, grpc_factory: Any) -> None:
    callee = grpc_factory(tc["responses"])
    opts: dict[str, Any] = {"max_attempts": tc.get("max_attempts", 3)}
    if tc.get("budget"):
        opts["budget"] = RetryBudget(Limits(tc["budget"]["ratio"], tc["budget"]["min_retries_per_second"]))
    sent = SentMetadata()
    raw, ch = hooked_channel(callee.address, sent, **opts)
    try:
        code = call(ch)
    finally:
        raw.close()
    want = tc["want"]
    assert code.name == want["code"]
    assert sent.sent == want["requests"]
    assert len(callee.requests) == len(want["requests"])
    client_spans = sorted(
        (s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT), key=lambda s: s.start_time
    )
    assert [hook_attrs(s) for s in client_spans] == want["spans"]


@pytest.mark.parametrize("tc", SERVER, ids=[c["name"] for c in SERVER])
def test_server(tc: dict[str, Any], spans: Any, grpc_factory: Any) -> None:
    callees = [grpc_factory(c["responses"]) for c in tc.get("calls", [])]
    channels = [hooked_channel(c.address) for c in callees]
    hints = StaticHints(
        {c.address: s["mode"] for s, c in zip(tc.get("calls", []), callees, strict=True) if s.get("mode")}
    )

    def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        for _, ch in channels:
            call(ch)
        return answer(context, tc["code"], tc.get("set_claim"), "the handler's answer")

    front = grpc_factory([], interceptors=[otel_server(), ServerInterceptor(hints=hints)], behavior=handler)
    raw = grpc.insecure_channel(front.address)
    try:
        fut = raw.unary_unary(METHOD).with_call
        trailers: Any
        try:
            _, c = fut(b"x", timeout=10)
            code, trailers = c.code(), c.trailing_metadata()
        except grpc.RpcError as e:
            code, trailers = e.code(), e.trailing_metadata()  # type: ignore[attr-defined]
    finally:
        raw.close()
        for r, _ in channels:
            r.close()
    want = tc["want"]
    assert code.name == tc["code"]
    md = list(trailers or ())
    assert [v for k, v in md if k == "error-claim"] == ([] if want["claim"] is None else [want["claim"]])
    assert [v for k, v in md if k == "grpc-retry-pushback-ms"] == (
        [] if want["pushback"] is None else [want["pushback"]]
    )
    # Only the front server runs the OpenTelemetry server interceptor; its
    # span ends just after the answer is sent.
    server_spans: list[Any] = []
    for _ in range(500):
        server_spans = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
        if server_spans:
            break
        time.sleep(0.01)
    assert len(server_spans) == 1
    assert hook_attrs(server_spans[0]) == want["span"]
