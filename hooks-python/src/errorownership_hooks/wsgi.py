# SPDX-License-Identifier: Apache-2.0

"""Server hooks for WSGI (Flask, Django, any WSGI app).

    from errorownership_hooks.wsgi import ErrorOwnershipMiddleware
    hints = HintClient.start("http://otel-collector:4320", "checkout")
    app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)           # Flask
    application = ErrorOwnershipMiddleware(get_wsgi_application(), hints=hints)  # Django

The middleware serves each request with a Ledger in the OpenTelemetry
context, so the client hooks record the request's outbound calls, and sets
``Error-Claim`` on server-fault responses (5xx by default) in
``start_response``. A handler that set one clean ``claimed`` or
``unclaimed`` wins; anything else (a relayed callee's garbage) is replaced.
``error_ownership.claim.sent`` and ``error_ownership.claim.reason`` go on
the server span of opentelemetry-instrumentation-wsgi or -flask, with this
middleware inside theirs or outside it (under opentelemetry-instrument,
Flask's ``app.wsgi_app`` is already the instrumented one: wrap it). Without
``hints`` every edge is unknown, so no error is claimed as coincidental.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ._client import server_fault
from ._core import LEDGER_KEY, LEDGER_VAR, HintSource, Ledger
from ._server import decide, own_claim
from .ownership import HTTP_CLAIM_HEADER, claim_of_values

__all__ = ["ErrorOwnershipMiddleware", "wsgi_operation"]

_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

_CLAIM_LOWER = HTTP_CLAIM_HEADER.lower()


def wsgi_operation(environ: dict[str, Any]) -> str:
    """The operation "METHOD /concrete/path", which the hints match to the route."""
    path = (environ.get("SCRIPT_NAME") or "") + (environ.get("PATH_INFO") or "")
    return f"{environ.get('REQUEST_METHOD', 'GET')} {path or '/'}"


class ErrorOwnershipMiddleware:
    """WSGI middleware; keyword arguments ``hints`` (a HintSource: edge
    modes), ``fault(status) -> bool`` (default: 500 and above) and
    ``operation(environ) -> str`` (the inbound operation for hint lookups)."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        hints: HintSource | None = None,
        fault: Callable[[int], bool] = server_fault,
        operation: Callable[[dict[str, Any]], str] = wsgi_operation,
    ) -> None:
        self.app = app
        self.hints = hints
        self.fault = fault
        self.operation = operation

    def _headers(
        self, code: int, headers: list[tuple[str, str]], ledger: Ledger, environ: dict[str, Any], span: trace.Span
    ) -> list[tuple[str, str]]:
        try:
            values = [v for k, v in headers if k.lower() == _CLAIM_LOWER]
            if values:
                own = claim_of_values(values)
                if own.value != "missing":
                    own_claim(own, span)
                    return headers
                headers = [(k, v) for k, v in headers if k.lower() != _CLAIM_LOWER]
            claim = decide(ledger, self.hints, self.operation(environ), code == 504, span)
            headers = list(headers)
            headers.append((HTTP_CLAIM_HEADER, claim.value))
        except Exception:  # the hooks never fail a request
            pass
        return headers

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        ledger = Ledger()
        span = trace.get_current_span()
        ctx = otel_context.set_value(LEDGER_KEY, ledger)

        def hooked_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: _ExcInfo | None = None
        ) -> Callable[[bytes], object]:
            try:
                code = int(status.split(" ", 1)[0])
            except ValueError:
                code = 0
            if code >= 200 and self.fault(code):
                # The server span: current here when the instrumentation
                # runs outside the middleware, and also when it runs
                # inside, as under opentelemetry-instrument, whose Flask
                # instrumentation wraps app.wsgi_app when the app is made
                # (so that app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app)
                # puts the middleware outside it).
                current = trace.get_current_span()
                headers = self._headers(code, headers, ledger, environ, current if current.is_recording() else span)
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        token = otel_context.attach(ctx)
        var_token = LEDGER_VAR.set(ledger)
        try:
            result = self.app(environ, hooked_start_response)
        finally:
            LEDGER_VAR.reset(var_token)
            otel_context.detach(token)
        return _Body(result, ctx, ledger)


class _Body:
    """The app's body, iterated with the ledger's context attached, so that a
    streaming app's calls are recorded too."""

    def __init__(self, body: Iterable[bytes], ctx: otel_context.Context, ledger: Ledger) -> None:
        self._body = body
        self._it: Iterator[bytes] | None = None
        self._ctx = ctx
        self._ledger = ledger

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        token = otel_context.attach(self._ctx)
        var_token = LEDGER_VAR.set(self._ledger)
        try:
            if self._it is None:
                self._it = iter(self._body)
            return next(self._it)
        finally:
            LEDGER_VAR.reset(var_token)
            otel_context.detach(token)

    def close(self) -> None:
        close = getattr(self._body, "close", None)
        if close is not None:
            close()
