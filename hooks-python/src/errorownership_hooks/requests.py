# SPDX-License-Identifier: Apache-2.0

"""Client hooks for ``requests``: a Session that retries by the rules of
error ownership.

    from errorownership_hooks.requests import Session
    session = Session(hints=hint_client)
    session.get("http://catalog:8080/items/1")

Server faults (5xx by default) and connection errors are retried only where
the decision matrix allows: claimed or unlabelled errors, idempotent
requests with a replayable body, within the attempt limit, the per-peer
retry budget and the deadline. Retries carry ``Retry-Attempt: N``. Each
logical call is recorded in the ledger of the current inbound request.

Under opentelemetry-instrumentation-requests each attempt is its own CLIENT
span (the Session retries above the instrumented ``Session.send``), and the
adapter the Session mounts, which runs inside that span, sets
``error_ownership.retry.attempt``, ``http.request.resend_count``, ``error_ownership.claim.received``
and ``error_ownership.retry.decision`` on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests
from opentelemetry import context as otel_context
from requests.adapters import HTTPAdapter

from ._client import (
    Attempt,
    ClientConfig,
    LogicalCall,
    attach_attempt,
    current_attempt,
    detach,
    http_operation,
    idempotent,
    peer_address,
    server_fault,
)
from ._core import DEFAULT_MAX_ATTEMPTS, Backoff, HintSource, RetryBudget
from .ownership import HTTP_CLAIM_HEADER, HTTP_RETRY_ATTEMPT_HEADER

__all__ = ["ErrorOwnershipAdapter", "Session"]

_SESSION_KEY = otel_context.create_key("errorownership.requests.session")
_FAILURES = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, requests.exceptions.ChunkedEncodingError)


def _claim_values(resp: requests.Response) -> list[str]:
    v = resp.headers.get(HTTP_CLAIM_HEADER)
    # http.client keeps a field's trailing whitespace; HTTP says it is not
    # part of the value (h11 and Go's net/http strip it).
    return [] if v is None else [v.strip(" \t")]


class ErrorOwnershipAdapter(HTTPAdapter):
    """An HTTPAdapter that settles the current attempt of a Session's
    logical call when its response arrives, inside the instrumentation's
    span, and annotates that span."""

    def __init__(self, *args: Any, fault: Callable[[int], bool] = server_fault, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fault = fault

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        a = current_attempt()
        try:
            resp = super().send(request, *args, **kwargs)
        except _FAILURES:
            if a is not None:
                a.settle(True, None)
                a.annotate()
            raise
        if a is not None:
            try:
                a.settle(self._fault(resp.status_code), _claim_values(resp))
                a.annotate()
            except Exception:  # the hooks never fail a call
                pass
        return resp


def _replayable(req: requests.PreparedRequest) -> bool:
    return req.body is None or isinstance(req.body, (bytes, str))


class Session(requests.Session):
    """A requests.Session with the error-ownership client hooks.

    Keyword arguments: ``hints`` (a HintSource, usually a HintClient: budget
    limits), ``budget`` (one RetryBudget for every peer instead of one per
    peer), ``max_attempts`` (default 3; 1 disables retries), ``backoff``
    (a Backoff), ``retry_policy(method, headers) -> bool`` (default:
    idempotent methods or an Idempotency-Key), ``fault(status) -> bool``
    (default: 500 and above), ``peer_service(url) -> str`` (default: the
    address, as the hints list it)."""

    def __init__(
        self,
        *,
        hints: HintSource | None = None,
        budget: RetryBudget | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff | None = None,
        retry_policy: Callable[[str, Any], bool] = idempotent,
        fault: Callable[[int], bool] = server_fault,
        peer_service: Callable[[str], str] = peer_address,
    ) -> None:
        super().__init__()
        self._eo_cfg = ClientConfig(hints=hints, budget=budget, max_attempts=max_attempts, backoff=backoff or Backoff())
        self._eo_policy = retry_policy
        self._eo_fault = fault
        self._eo_peer = peer_service
        adapter = ErrorOwnershipAdapter(fault=fault)
        self.mount("http://", adapter)
        self.mount("https://", adapter)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        if otel_context.get_value(_SESSION_KEY) is self:
            # A redirect inside one attempt: part of that attempt.
            return super().send(request, **kwargs)
        method = (request.method or "GET").upper()
        url = request.url or ""
        cfg = self._eo_cfg
        try:
            has_policy = self._eo_policy(method, request.headers) and _replayable(request)
        except Exception:
            has_policy = False
        lc = LogicalCall(cfg, self._eo_peer(url), has_policy, http=True)
        attempt_req = request
        n = 0
        while True:
            a = Attempt(lc, n)
            token = attach_attempt(a)
            tok2 = otel_context.attach(otel_context.set_value(_SESSION_KEY, self))
            resp: requests.Response | None = None
            err: BaseException | None = None
            try:
                resp = super().send(attempt_req, **kwargs)
            except _FAILURES as e:
                err = e
            finally:
                otel_context.detach(tok2)
                detach(token)
            if resp is not None:
                a.settle(self._eo_fault(resp.status_code), _claim_values(resp))
            else:
                a.settle(True, None)
            if not a.failed:
                lc.end_ok()
                assert resp is not None
                return resp
            lc.peer_operation = http_operation(method, url)
            if a.decision.value != "retried":
                lc.end(a.outcome())
                if err is not None:
                    raise err
                assert resp is not None
                return resp
            if resp is not None:
                resp.close()
            if a.delay > 0:
                time.sleep(a.delay)
            n += 1
            attempt_req = request.copy()
            attempt_req.headers[HTTP_RETRY_ATTEMPT_HEADER] = str(n)
