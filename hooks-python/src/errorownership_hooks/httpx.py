# SPDX-License-Identifier: Apache-2.0

"""Client hooks for ``httpx``: transports that retry by the rules of error
ownership.

    import httpx
    from errorownership_hooks.httpx import Transport, AsyncTransport
    client = httpx.Client(transport=Transport(hints=hint_client))
    aclient = httpx.AsyncClient(transport=AsyncTransport(hints=hint_client))

Transport wraps an ``httpx.HTTPTransport`` (or the transport given) and
calls it once per attempt. Under opentelemetry-instrumentation-httpx, which
wraps ``HTTPTransport.handle_request``, each attempt is its own CLIENT span;
the hooks settle each attempt inside that span (from the connection pool
the instrumented transport calls) and set ``error_ownership.retry.attempt``,
``http.request.resend_count``, ``error_ownership.claim.received`` and
``error_ownership.retry.decision`` on it. A transport without a ``_pool`` gets no
per-attempt attributes; the retries still follow the rules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import httpx

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

__all__ = ["AsyncTransport", "Transport"]

_CLAIM_KEY = HTTP_CLAIM_HEADER.lower().encode()


def _core_claim_values(headers: Any) -> list[str]:
    out: list[str] = []
    for k, v in headers:
        if bytes(k).lower() == _CLAIM_KEY:
            out.append(bytes(v).decode("latin-1"))
    return out


class _PoolProxy:
    """Stands for the transport's connection pool, so that the hooks see each
    attempt's answer inside the instrumentation's span."""

    def __init__(self, pool: Any, fault: Callable[[int], bool]) -> None:
        self._pool = pool
        self._fault = fault

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def __enter__(self) -> Any:
        self._pool.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._pool.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._pool.__aexit__(*exc)

    def _settle(self, resp: Any) -> None:
        a = current_attempt()
        if a is not None:
            try:
                a.settle(self._fault(int(resp.status)), _core_claim_values(resp.headers))
                a.annotate()
            except Exception:
                pass

    def _fail(self) -> None:
        a = current_attempt()
        if a is not None:
            a.settle(True, None)
            a.annotate()

    def handle_request(self, request: Any) -> Any:
        try:
            resp = self._pool.handle_request(request)
        except Exception:
            self._fail()
            raise
        self._settle(resp)
        return resp

    async def handle_async_request(self, request: Any) -> Any:
        try:
            resp = await self._pool.handle_async_request(request)
        except Exception:
            self._fail()
            raise
        self._settle(resp)
        return resp


def _hook_pool(transport: Any, fault: Callable[[int], bool]) -> None:
    pool = getattr(transport, "_pool", None)
    if pool is not None and not isinstance(pool, _PoolProxy):
        transport._pool = _PoolProxy(pool, fault)


def _retry_request(req: httpx.Request, n: int) -> httpx.Request:
    headers = req.headers.copy()
    headers[HTTP_RETRY_ATTEMPT_HEADER] = str(n)
    return httpx.Request(req.method, req.url, headers=headers, content=req.content, extensions=req.extensions)


_T = TypeVar("_T", httpx.BaseTransport, httpx.AsyncBaseTransport)


class _Base(Generic[_T]):
    """What Transport and AsyncTransport share: their settings, and a logical
    call's first and last steps. Keyword arguments as for
    errorownership_hooks.requests.Session; transport is the one wrapped,
    by default a new one of _default."""

    _default: Callable[[], _T]

    def __init__(
        self,
        transport: _T | None = None,
        *,
        hints: HintSource | None = None,
        budget: RetryBudget | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff | None = None,
        retry_policy: Callable[[str, Any], bool] = idempotent,
        fault: Callable[[int], bool] = server_fault,
        peer_service: Callable[[str], str] = peer_address,
    ) -> None:
        self._cfg = ClientConfig(hints=hints, budget=budget, max_attempts=max_attempts, backoff=backoff or Backoff())
        self._policy = retry_policy
        self._fault = fault
        self._peer = peer_service
        self._transport: _T = transport if transport is not None else self._default()
        _hook_pool(self._transport, fault)

    def _begin(self, request: httpx.Request) -> LogicalCall:
        try:
            has_policy = self._policy(request.method, request.headers) and isinstance(request.stream, httpx.ByteStream)
        except Exception:
            has_policy = False
        return LogicalCall(self._cfg, self._peer(str(request.url)), has_policy, http=True)

    def _after(self, lc: LogicalCall, a: Attempt, request: httpx.Request, resp: httpx.Response | None) -> bool:
        """Settle the attempt if nothing inside did; report done."""
        if resp is not None:
            a.settle(self._fault(resp.status_code), resp.headers.get_list(HTTP_CLAIM_HEADER))
        else:
            a.settle(True, None)
        if not a.failed:
            lc.end_ok()
            return True
        lc.peer_operation = http_operation(request.method, str(request.url))
        if a.decision.value != "retried":
            lc.end(a.outcome())
            return True
        return False


class Transport(_Base[httpx.BaseTransport], httpx.BaseTransport):
    """An httpx transport with the error-ownership client hooks, around
    transport (default httpx.HTTPTransport()). Keyword arguments as for
    errorownership_hooks.requests.Session."""

    _default = httpx.HTTPTransport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        lc = self._begin(request)
        attempt_req = request
        n = 0
        while True:
            a = Attempt(lc, n)
            token = attach_attempt(a)
            resp: httpx.Response | None = None
            err: httpx.TransportError | None = None
            try:
                resp = self._transport.handle_request(attempt_req)
            except httpx.TransportError as e:
                err = e
            finally:
                detach(token)
            if self._after(lc, a, request, resp):
                if err is not None:
                    raise err
                assert resp is not None
                return resp
            if resp is not None:
                resp.close()
            if a.delay > 0:
                time.sleep(a.delay)
            n += 1
            attempt_req = _retry_request(request, n)

    def close(self) -> None:
        self._transport.close()


class AsyncTransport(_Base[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    """The asyncio twin of Transport, around transport (default
    httpx.AsyncHTTPTransport())."""

    _default = httpx.AsyncHTTPTransport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        lc = self._begin(request)
        attempt_req = request
        n = 0
        while True:
            a = Attempt(lc, n)
            token = attach_attempt(a)
            resp: httpx.Response | None = None
            err: httpx.TransportError | None = None
            try:
                resp = await self._transport.handle_async_request(attempt_req)
            except httpx.TransportError as e:
                err = e
            finally:
                detach(token)
            if self._after(lc, a, request, resp):
                if err is not None:
                    raise err
                assert resp is not None
                return resp
            if resp is not None:
                await resp.aclose()
            if a.delay > 0:
                await asyncio.sleep(a.delay)
            n += 1
            attempt_req = _retry_request(request, n)

    async def aclose(self) -> None:
        await self._transport.aclose()
