# SPDX-License-Identifier: Apache-2.0

"""gRPC hooks for grpcio: a client interceptor that retries by the rules of
error ownership and a server interceptor that claims errors.

    from opentelemetry.instrumentation.grpc import client_interceptor, server_interceptor
    from opentelemetry.instrumentation.grpc.grpcext import intercept_channel
    from errorownership_hooks.grpc import ClientInterceptor, ServerInterceptor

    hooks = ClientInterceptor("catalog:50051", hints=hint_client)
    inner = grpc.intercept_channel(grpc.insecure_channel("catalog:50051"), hooks.attempt_interceptor)
    channel = grpc.intercept_channel(intercept_channel(inner, client_interceptor()), hooks)
    server = grpc.server(executor, interceptors=[server_interceptor(), ServerInterceptor(hints=hint_client)])

(hooks-python/README.md's gRPC section, which examples/grpc_stock.py runs.)

The client retries server-fault codes (UNKNOWN, DEADLINE_EXCEEDED,
UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS) of unary-unary calls when
the callee claimed the error or sent no claim (``error-claim`` trailer),
within the attempts, the per-peer budget and the call's timeout; retries
carry ``grpc-previous-rpc-attempts``. Do not configure a gRPC retry policy
for the same methods as well.

The OpenTelemetry client interceptor sits between the hooks and their
``attempt_interceptor``, as above, so that each attempt is a CLIENT span of
its own carrying the attempt's attributes. It is a grpcext interceptor,
which ``grpc.intercept_channel`` refuses: it goes through grpcext's
``intercept_channel``.

The server interceptor sets ``error-claim`` (and
``grpc-retry-pushback-ms: -1`` with ``unclaimed``) on server-fault
statuses, and ``error_ownership.claim.sent`` / ``error_ownership.claim.reason`` on the current
span (the server span of opentelemetry-instrumentation-grpc, listed before
it in ``interceptors``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

from ._client import Attempt, ClientConfig, LogicalCall, attach_attempt, current_attempt, detach
from ._core import DEFAULT_MAX_ATTEMPTS, LEDGER_KEY, Backoff, HintSource, Ledger, RetryBudget
from ._server import decide, own_claim
from .ownership import GRPC_CLAIM_KEY, GRPC_PREVIOUS_ATTEMPTS_KEY, GRPC_PUSHBACK_KEY, Claim, claim_of_values

__all__ = ["DEFAULT_FAULT_CODES", "ClientInterceptor", "ServerInterceptor", "target_address"]

DEFAULT_FAULT_CODES = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def target_address(target: str) -> str:
    """A channel target as OpenTelemetry records the callee:
    "dns:///checkout.prod:443" is "checkout.prod:443"."""
    if "://" not in target and not target.startswith(("dns:", "unix:", "ipv4:", "ipv6:")):
        return target
    try:
        u = urlsplit(target)
    except ValueError:
        return target
    ep = u.path.lstrip("/") or u.netloc
    return ep or target


def _claim_values(md: Iterable[tuple[str, Any]] | None) -> list[str]:
    out: list[str] = []
    for k, v in md or ():
        if k.lower() == GRPC_CLAIM_KEY:
            out.append(v.decode("latin-1") if isinstance(v, bytes) else str(v))
    return out


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str | bytes]] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _ClientDetails(_Details, grpc.ClientCallDetails):
    pass


def _outcome_code(outcome: Any) -> tuple[grpc.StatusCode, Any]:
    try:
        return outcome.code(), outcome.trailing_metadata()
    except Exception:
        return grpc.StatusCode.UNKNOWN, None


class _AttemptInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Settles and annotates each attempt inside the per-attempt span."""

    def __init__(self, faults: frozenset[grpc.StatusCode]) -> None:
        self._faults = faults

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        outcome = continuation(client_call_details, request)
        a = current_attempt()
        if a is not None:
            try:
                code, trailers = _outcome_code(outcome)
                a.settle(code in self._faults, _claim_values(trailers))
                a.annotate()
            except Exception:
                pass
        return outcome


class ClientInterceptor(grpc.UnaryUnaryClientInterceptor):
    """The client hooks. ``target`` is the channel's target, which names the
    callee for budgets and the ledger (or give ``peer_service``). Keyword
    arguments: ``hints``, ``budget``, ``max_attempts`` (default 3),
    ``backoff``, ``retry_policy(full_method) -> bool`` (default: every
    method), ``fault_codes``."""

    def __init__(
        self,
        target: str = "",
        *,
        peer_service: str = "",
        hints: HintSource | None = None,
        budget: RetryBudget | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff | None = None,
        retry_policy: Callable[[str], bool] | None = None,
        fault_codes: Iterable[grpc.StatusCode] = DEFAULT_FAULT_CODES,
    ) -> None:
        self._cfg = ClientConfig(hints=hints, budget=budget, max_attempts=max_attempts, backoff=backoff or Backoff())
        self._peer = peer_service or target_address(target)
        self._policy = retry_policy
        self._faults = frozenset(fault_codes)
        self.attempt_interceptor: grpc.UnaryUnaryClientInterceptor = _AttemptInterceptor(self._faults)

    @classmethod
    def _sharing(cls, target: str, cfg: ClientConfig) -> ClientInterceptor:
        """The instrumentor's (_autohooks): settings and budgets shared with
        every client it hooks."""
        hooks = cls(target)
        hooks._cfg = cfg
        return hooks

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        method = str(client_call_details.method)
        try:
            has_policy = self._policy is None or bool(self._policy(method))
        except Exception:
            has_policy = False
        lc = LogicalCall(self._cfg, self._peer, has_policy, http=False)
        lc.peer_operation = method.lstrip("/")
        timeout = client_call_details.timeout
        if timeout is not None:
            dl = time.monotonic() + timeout
            lc.deadline = dl if lc.deadline is None else min(lc.deadline, dl)
        base_md = list(client_call_details.metadata or ())
        n = 0
        while True:
            details: Any = client_call_details
            if n > 0 or lc.deadline is not None:
                md = base_md + [(GRPC_PREVIOUS_ATTEMPTS_KEY, str(n))] if n > 0 else base_md
                t = None if lc.deadline is None else max(lc.deadline - time.monotonic(), 0.0)
                details = _ClientDetails(
                    method,
                    t,
                    md or None,
                    getattr(client_call_details, "credentials", None),
                    getattr(client_call_details, "wait_for_ready", None),
                    getattr(client_call_details, "compression", None),
                )
            a = Attempt(lc, n)
            token = attach_attempt(a)
            try:
                outcome = continuation(details, request)
            finally:
                detach(token)
            code, trailers = _outcome_code(outcome)
            a.settle(code in self._faults, _claim_values(trailers))
            if not a.failed:
                lc.end_ok()
                return outcome
            if a.decision.value != "retried":
                lc.end(a.outcome())
                return outcome
            if a.delay > 0:
                time.sleep(a.delay)
            n += 1


class _Context:
    """The servicer context the handler sees: it notes the status and the
    claim the handler sets."""

    def __init__(self, ctx: grpc.ServicerContext) -> None:
        self._ctx = ctx
        self.code: grpc.StatusCode | None = None
        self.trailers: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def set_trailing_metadata(self, md: Any) -> None:
        self.trailers = list(md or ())
        self._ctx.set_trailing_metadata(md)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code
        self._ctx.set_code(code)

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code if code != grpc.StatusCode.OK else grpc.StatusCode.UNKNOWN
        self._ctx.abort(code, details)

    def abort_with_status(self, status: Any) -> None:
        self.trailers = list(status.trailing_metadata or ())
        self.code = status.code
        self._ctx.abort_with_status(status)


class ServerInterceptor(grpc.ServerInterceptor):
    """The server hooks for unary-unary methods; keyword arguments ``hints``
    and ``fault_codes``."""

    def __init__(
        self, *, hints: HintSource | None = None, fault_codes: Iterable[grpc.StatusCode] = DEFAULT_FAULT_CODES
    ) -> None:
        self._hints = hints
        self._faults = frozenset(fault_codes)

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        operation = str(handler_call_details.method).lstrip("/")

        def behavior(request: Any, context: grpc.ServicerContext) -> Any:
            ctx = _Context(context)
            ledger = Ledger()
            span = trace.get_current_span()
            token = otel_context.attach(otel_context.set_value(LEDGER_KEY, ledger))
            try:
                try:
                    resp = inner(request, ctx)
                except Exception:
                    self._settle(ctx, ctx.code or grpc.StatusCode.UNKNOWN, ledger, operation, span)
                    raise
                if ctx.code is not None and ctx.code != grpc.StatusCode.OK:
                    self._settle(ctx, ctx.code, ledger, operation, span)
                return resp
            finally:
                otel_context.detach(token)

        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _settle(self, ctx: _Context, code: grpc.StatusCode, ledger: Ledger, operation: str, span: trace.Span) -> None:
        if code not in self._faults:
            return
        try:
            values = _claim_values(ctx.trailers)
            rest = [(k, v) for k, v in ctx.trailers if k.lower() != GRPC_CLAIM_KEY]
            if values:
                own = claim_of_values(values)
                if own is not Claim.MISSING:
                    own_claim(own, span)
                    if own is Claim.UNCLAIMED and not any(k.lower() == GRPC_PUSHBACK_KEY for k, _ in rest):
                        ctx._ctx.set_trailing_metadata(tuple(ctx.trailers) + ((GRPC_PUSHBACK_KEY, "-1"),))
                    return
            remaining = None
            with contextlib.suppress(Exception):
                remaining = ctx._ctx.time_remaining()
            timed_out = code == grpc.StatusCode.DEADLINE_EXCEEDED or (remaining is not None and remaining <= 0)
            claim = decide(ledger, self._hints, operation, timed_out, span)
            rest.append((GRPC_CLAIM_KEY, claim.value))
            if claim is Claim.UNCLAIMED:
                rest = [(k, v) for k, v in rest if k.lower() != GRPC_PUSHBACK_KEY] + [(GRPC_PUSHBACK_KEY, "-1")]
            ctx._ctx.set_trailing_metadata(tuple(rest))
        except Exception:  # the hooks never fail a call
            pass
