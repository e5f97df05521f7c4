# SPDX-License-Identifier: Apache-2.0

"""What the HTTP and gRPC client hooks share: one logical call across its
attempts, and the settling of each attempt where its span is current."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace

from ._core import (
    DEFAULT_MAX_ATTEMPTS,
    Backoff,
    Budgets,
    HintSource,
    Ledger,
    Outcome,
    RetryBudget,
    current_deadline,
    decide_retry,
    fits,
    ledger_from,
    past,
)
from .ownership import (
    ATTR_CLAIM_RECEIVED,
    ATTR_HTTP_RESEND_COUNT,
    ATTR_RETRY_ATTEMPT,
    ATTR_RETRY_DECISION,
    Claim,
    RetryDecision,
    claim_of_values,
)

ATTEMPT_KEY = otel_context.create_key("errorownership.attempt")

IDEMPOTENT_METHODS = frozenset({"", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


def server_fault(status: int) -> bool:
    """500 and above are the server's fault; 4xx the caller's."""
    return status >= 500


def idempotent(method: str, headers: object) -> bool:
    """Whether a request may be retried by default: an idempotent method, or
    an Idempotency-Key / X-Idempotency-Key header. headers is any mapping
    with case-insensitive ``in`` (requests', httpx') or a plain dict."""
    if method.upper() in IDEMPOTENT_METHODS:
        return True
    try:
        return "Idempotency-Key" in headers or "X-Idempotency-Key" in headers  # type: ignore[operator]
    except TypeError:
        return False


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def peer_address(url: str) -> str:
    """The callee as OpenTelemetry's HTTP client instrumentation records it
    (server.address[:server.port]): the URL's host, with its port when it is
    not the scheme's default."""
    try:
        u = urlsplit(url)
        host = u.hostname or ""
        port = u.port
    except ValueError:
        return ""
    if port is None or _DEFAULT_PORTS.get(u.scheme.lower()) == port:
        return host
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def http_operation(method: str, url: str) -> str:
    """The operation "METHOD /path", as a server span is named; the hints
    match it to the route."""
    try:
        path = urlsplit(url).path or "/"
    except ValueError:
        path = "/"
    return f"{method.upper()} {path}"


@dataclass
class ClientConfig:
    """The client hooks' settings (see each hook's keyword arguments)."""

    hints: HintSource | None = None
    budget: RetryBudget | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    budgets: Budgets = field(init=False)

    def __post_init__(self) -> None:
        self.max_attempts = max(int(self.max_attempts), 1)
        self.budgets = Budgets(self.hints, self.budget)


class LogicalCall:
    """One call across its attempts."""

    __slots__ = (
        "budget",
        "call",
        "caller_span_id",
        "cfg",
        "deadline",
        "has_policy",
        "http",
        "ledger",
        "peer",
        "peer_operation",
    )

    def __init__(self, cfg: ClientConfig, peer: str, has_policy: bool, *, http: bool) -> None:
        self.cfg = cfg
        self.peer = peer
        self.peer_operation = ""
        self.has_policy = has_policy and cfg.max_attempts > 1
        self.http = http
        self.budget = cfg.budgets.for_peer(peer)
        self.budget.deposit()
        self.ledger: Ledger | None = ledger_from()
        self.call = self.ledger.begin(peer) if self.ledger is not None else -1
        self.caller_span_id = trace.get_current_span().get_span_context().span_id
        self.deadline = current_deadline()

    def end(self, outcome: Outcome) -> None:
        if self.ledger is not None:
            self.ledger.end(self.call, outcome)

    def end_ok(self) -> None:
        self.end(Outcome(peer_service=self.peer, peer_operation=self.peer_operation))


class Attempt:
    """One attempt of a logical call. It travels in the attempt's context,
    so that a layer inside the instrumentation's per-attempt span can settle
    it and annotate that span; whoever comes first settles a failure, once."""

    __slots__ = ("call", "decision", "delay", "failed", "final", "in_flight", "lock", "n", "received", "settled")

    def __init__(self, call: LogicalCall, n: int) -> None:
        self.call = call
        self.n = n
        self.lock = threading.Lock()
        self.settled = False
        self.final = False
        self.failed = False
        self.in_flight = False
        self.received = Claim.MISSING
        self.decision = RetryDecision.NONE
        self.delay = 0.0

    def settle(self, failed: bool, claim_values: Sequence[str] | None) -> None:
        """Decide what follows this attempt. failed: a server fault or no
        answer; claim_values: the claim header's or trailer's values (None:
        no answer)."""
        with self.lock:
            if self.final:
                return
            self.settled = True
            if not failed:
                self.failed = False  # a success may be superseded (redirects)
                return
            self.final = True
            self.failed = True
            lc = self.call
            if past(lc.deadline):
                self.decision, self.in_flight = RetryDecision.EXHAUSTED, True
                return
            self.received = claim_of_values(list(claim_values)) if claim_values is not None else Claim.MISSING
            left = self.n + 1 < lc.cfg.max_attempts
            if lc.has_policy and left and self.received is not Claim.UNCLAIMED:
                self.delay = lc.cfg.backoff.delay(self.n + 1)
                left = fits(self.delay, lc.deadline)
                lc.cfg.budgets.refresh(lc.budget)
            self.decision = decide_retry(self.received, lc.has_policy, left, lc.budget)

    def annotate(self, span: trace.Span | None = None) -> None:
        """Put the attempt's attributes on its span (default: the current
        one), unless that is the caller's own span or not recording."""
        if span is None:
            span = trace.get_current_span()
        if not span.is_recording() or span.get_span_context().span_id == self.call.caller_span_id:
            return
        attrs: dict[str, str | int] = {ATTR_RETRY_ATTEMPT: self.n}
        if self.n > 0 and self.call.http:
            attrs[ATTR_HTTP_RESEND_COUNT] = self.n
        if self.failed:
            attrs[ATTR_CLAIM_RECEIVED] = self.received.value
            attrs[ATTR_RETRY_DECISION] = self.decision.value
        span.set_attributes(attrs)

    def outcome(self) -> Outcome:
        lc = self.call
        return Outcome(
            peer_service=lc.peer,
            peer_operation=lc.peer_operation,
            failed=self.failed,
            received=self.received,
            decision=self.decision,
            in_flight=self.in_flight,
        )


def current_attempt() -> Attempt | None:
    a = otel_context.get_value(ATTEMPT_KEY)
    return a if isinstance(a, Attempt) else None


def attach_attempt(a: Attempt) -> object:
    return otel_context.attach(otel_context.set_value(ATTEMPT_KEY, a))


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


RetryPolicy = Callable[[str, object], bool]
