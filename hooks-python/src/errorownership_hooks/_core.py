# SPDX-License-Identifier: Apache-2.0

"""The rules: the claim decision, the retry decision, the retry budget, the
ledger of a request's outbound calls, and what the client hooks share."""

from __future__ import annotations

import contextlib
import contextvars
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from opentelemetry import context as otel_context

from .ownership import Claim, Limits, Mode, Reason, RetryDecision, default_limits

# ---------------------------------------------------------------------------
# Claim and retry decisions


@dataclass
class Outcome:
    """The final outcome of one outbound logical call: its first attempt and
    its retries."""

    peer_service: str = ""
    peer_operation: str = ""
    failed: bool = False
    received: Claim = Claim.MISSING
    decision: RetryDecision = RetryDecision.NONE
    in_flight: bool = False


ModeFunc = Callable[[str, str], Mode]
"""Tells the mode of the edge from the current inbound operation to
(peer_service, peer_operation)."""


class HintSource(Protocol):
    """What the hooks need from the learned model. HintClient implements it;
    so can a static table."""

    def mode(self, operation: str, peer_service: str, peer_operation: str) -> Mode: ...

    def budget_limits(self) -> Limits: ...


def decide_claim(outcomes: Sequence[Outcome], modes: ModeFunc | None, timed_out: bool) -> tuple[Claim, Reason]:
    """What a server tells its caller about an error it returns
    (docs/design.md §4.1-4.2)."""
    if timed_out:
        for o in outcomes:
            if o.in_flight:
                return Claim.UNCLAIMED, Reason.PROPAGATED
    failed = blocking = missing = no_policy = 0
    for o in outcomes:
        if not o.failed:
            continue
        failed += 1
        if modes is not None and modes(o.peer_service, o.peer_operation) is Mode.FAIL_OPEN:
            continue
        blocking += 1
        if o.received is Claim.MISSING:
            missing += 1
        if o.decision is RetryDecision.NO_POLICY and o.received is not Claim.UNCLAIMED:
            no_policy += 1
    if failed == 0:
        return Claim.CLAIMED, Reason.OWN
    if blocking == 0:
        return Claim.CLAIMED, Reason.COINCIDENTAL
    if no_policy == blocking:
        return Claim.CLAIMED, Reason.PROPAGATED
    if missing == blocking:
        return Claim.UNCLAIMED, Reason.MISSING_DOWNSTREAM_CLAIM
    return Claim.UNCLAIMED, Reason.PROPAGATED


def decide_retry(received: Claim, has_policy: bool, attempts_left: bool, budget: RetryBudget | None) -> RetryDecision:
    """Whether a caller retries a failed attempt (docs/design.md §4.3). A
    token is withdrawn from budget only when every other check passes; a
    None budget allows every retry."""
    if not has_policy:
        return RetryDecision.NO_POLICY
    if received is Claim.UNCLAIMED:
        return RetryDecision.SUPPRESSED_UNCLAIMED
    if not attempts_left:
        return RetryDecision.EXHAUSTED
    if budget is not None and not budget.try_withdraw():
        return RetryDecision.SUPPRESSED_BUDGET
    return RetryDecision.RETRIED


# ---------------------------------------------------------------------------
# The retry budget

DEFAULT_BUDGET_WINDOW = 10.0
_SLICES = 10
_MIN_WINDOW_NS = 10_000_000


def _non_negative(f: float) -> float:
    return f if f > 0 else 0.0  # NaN too


class RetryBudget:
    """Bounds retries to a share of requests over a sliding window, as
    Finagle's RetryBudget: each request deposits, each retry withdraws, and
    a retry is allowed while ``retries ≤ ratio × requests +
    min_retries_per_second × window`` holds with it. The window is cut into
    ten slices; a count lasts until its slice is ten slices old.

    Thread-safe. ``clock`` returns nanoseconds (default time.monotonic_ns),
    for deterministic tests."""

    __slots__ = ("_clock", "_deposits", "_floor", "_lock", "_ratio", "_slice_ns", "_start", "_window", "_withdrawals")

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        window: float = DEFAULT_BUDGET_WINDOW,
        clock: Callable[[], int] | None = None,
    ) -> None:
        window_ns = max(int(round(window * 1e9)), _MIN_WINDOW_NS)
        self._slice_ns = window_ns // _SLICES
        self._window = self._slice_ns * _SLICES / 1e9
        self._clock = clock if clock is not None else time.monotonic_ns
        self._start = self._clock()
        self._lock = threading.Lock()
        # Each slot: [slice number, count].
        self._deposits = [[-_SLICES, 0] for _ in range(_SLICES)]
        self._withdrawals = [[-_SLICES, 0] for _ in range(_SLICES)]
        self._ratio = 0.0
        self._floor = 0.0
        self.set_limits(limits if limits is not None else default_limits())

    @property
    def window(self) -> float:
        """How long a count lasts, in seconds."""
        return self._window

    def set_limits(self, limits: Limits) -> None:
        """Change the limits; counts already made stay. Negative or NaN
        values are taken as 0."""
        self._ratio = _non_negative(float(limits.ratio))
        self._floor = _non_negative(float(limits.min_retries_per_second))

    def limits(self) -> Limits:
        return Limits(self._ratio, self._floor)

    def _epoch(self) -> int:
        d = self._clock() - self._start
        return d // self._slice_ns if d > 0 else 0

    @staticmethod
    def _bump(slots: list[list[int]], e: int, delta: int) -> None:
        slot = slots[e % _SLICES]
        if slot[0] != e:
            slot[0], slot[1] = e, 0
        slot[1] += delta

    def _balance(self, e: int) -> float:
        dep = wd = 0
        for s, n in self._deposits:
            if e - s < _SLICES:
                dep += n
        for s, n in self._withdrawals:
            if e - s < _SLICES:
                wd += n
        return self._ratio * dep + self._floor * self._window - wd + 1e-9

    def deposit(self) -> None:
        """Record one request (a logical call's first attempt)."""
        e = self._epoch()
        with self._lock:
            self._bump(self._deposits, e, 1)

    def try_withdraw(self) -> bool:
        """Take one retry and report whether it was allowed. A refused
        withdrawal costs nothing."""
        e = self._epoch()
        with self._lock:
            if self._balance(e) - 1 >= 0:
                self._bump(self._withdrawals, e, 1)
                return True
            return False

    def available(self) -> int:
        """How many retries the budget would allow now."""
        e = self._epoch()
        with self._lock:
            return math.floor(self._balance(e))


MAX_PEERS = 256


class Budgets:
    """One RetryBudget per peer, at most MAX_PEERS, then one shared overflow
    budget; or ``shared`` for every peer. Limits come from ``hints``."""

    def __init__(self, hints: HintSource | None = None, shared: RetryBudget | None = None) -> None:
        self.hints = hints
        self.shared = shared
        self._peers: dict[str, RetryBudget] = {}
        self._overflow: RetryBudget | None = None
        self._lock = threading.Lock()

    def _limits(self) -> Limits:
        if self.hints is not None:
            try:
                return self.hints.budget_limits()
            except Exception:  # a hint source must never fail a call
                pass
        return default_limits()

    def for_peer(self, peer: str) -> RetryBudget:
        if self.shared is not None:
            return self.shared
        b = self._peers.get(peer)
        if b is not None:
            return b
        with self._lock:
            b = self._peers.get(peer)
            if b is not None:
                return b
            if len(self._peers) >= MAX_PEERS:
                if self._overflow is None:
                    self._overflow = RetryBudget(self._limits())
                return self._overflow
            b = RetryBudget(self._limits())
            self._peers[peer] = b
            return b

    def refresh(self, b: RetryBudget) -> None:
        """Bring b's limits up to date with the hints (failure path only)."""
        if self.hints is not None and b is not self.shared:
            lim = self._limits()
            if lim != b.limits():
                b.set_limits(lim)


# ---------------------------------------------------------------------------
# The ledger

LEDGER_KEY = otel_context.create_key("errorownership.ledger")
# The ledger is also kept in a context variable of its own: an
# instrumentation outside the server hooks (opentelemetry-instrument's Flask
# instrumentation wraps app.wsgi_app when the app is made) starts its span
# from a context extracted afresh from the request's headers, which drops
# every value of the OpenTelemetry context the hooks set.
LEDGER_VAR: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar("errorownership_ledger", default=None)
DEADLINE_KEY = otel_context.create_key("errorownership.deadline")


class Ledger:
    """The outbound logical calls of one inbound request. Client hooks find
    it in the OpenTelemetry context (ledger_from) and record each call with
    begin and end; a call begun and not ended is in flight. Thread-safe."""

    __slots__ = ("_calls", "_done", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[Outcome] = []
        self._done: list[bool] = []

    def begin(self, peer_service: str) -> int:
        with self._lock:
            self._calls.append(Outcome(peer_service=peer_service))
            self._done.append(False)
            return len(self._calls) - 1

    def end(self, call: int, outcome: Outcome) -> None:
        with self._lock:
            if 0 <= call < len(self._calls):
                self._calls[call] = outcome
                self._done[call] = True

    def record(self, outcome: Outcome) -> None:
        self.end(self.begin(outcome.peer_service), outcome)

    def outcomes(self) -> list[Outcome]:
        """A snapshot, in the order the calls began; a call not yet ended is
        in flight, with only its peer service known."""
        with self._lock:
            return [
                o if done else Outcome(peer_service=o.peer_service, in_flight=True)
                for o, done in zip(self._calls, self._done, strict=True)
            ]

    def decide(self, modes: ModeFunc | None, timed_out: bool) -> tuple[Claim, Reason]:
        """decide_claim over a snapshot; a call in flight means timed out."""
        outs = self.outcomes()
        if any(o.in_flight for o in outs):
            timed_out = True
        return decide_claim(outs, modes, timed_out)


def ledger_from(ctx: otel_context.Context | None = None) -> Ledger | None:
    """The Ledger the (current) OpenTelemetry context carries, or None;
    without ctx, else the one the server hooks made current."""
    v = otel_context.get_value(LEDGER_KEY, ctx)
    if isinstance(v, Ledger):
        return v
    return LEDGER_VAR.get() if ctx is None else None


@contextlib.contextmanager
def ledger_scope(ledger: Ledger | None = None) -> Iterator[Ledger]:
    """Make a Ledger current for the block (what the server hooks do)."""
    led = ledger if ledger is not None else Ledger()
    token = otel_context.attach(otel_context.set_value(LEDGER_KEY, led))
    var_token = LEDGER_VAR.set(led)
    try:
        yield led
    finally:
        LEDGER_VAR.reset(var_token)
        otel_context.detach(token)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Give the calls made in the block a deadline: the client hooks never
    back off past it, and make no retry after it."""
    at = time.monotonic() + seconds
    cur = otel_context.get_value(DEADLINE_KEY)
    if isinstance(cur, float) and cur < at:
        at = cur
    token = otel_context.attach(otel_context.set_value(DEADLINE_KEY, at))
    try:
        yield
    finally:
        otel_context.detach(token)


def current_deadline() -> float | None:
    v = otel_context.get_value(DEADLINE_KEY)
    return v if isinstance(v, float) else None


# ---------------------------------------------------------------------------
# Backoff

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_INITIAL_BACKOFF = 0.05
DEFAULT_MAX_BACKOFF = 1.0


@dataclass(frozen=True)
class Backoff:
    """Retry n waits a uniformly random time in [d/2, d], d = min(maximum,
    initial × 2^(n−1)), in seconds."""

    initial: float = DEFAULT_INITIAL_BACKOFF
    maximum: float = DEFAULT_MAX_BACKOFF

    def delay(self, n: int) -> float:
        d = self.initial
        i = 1
        while i < n and d < self.maximum:
            d *= 2
            i += 1
        d = min(d, self.maximum)
        if d <= 0:
            return 0.0
        return random.uniform(d / 2, d)


def fits(delay: float, dl: float | None) -> bool:
    """Whether waiting delay still leaves time before the deadline dl."""
    return dl is None or dl - time.monotonic() > delay


def past(dl: float | None) -> bool:
    return dl is not None and time.monotonic() >= dl
