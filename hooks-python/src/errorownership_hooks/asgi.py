# SPDX-License-Identifier: Apache-2.0

"""Server hooks for ASGI (FastAPI, Starlette, any ASGI app).

    from errorownership_hooks.asgi import ErrorOwnershipMiddleware
    app.add_middleware(ErrorOwnershipMiddleware, hints=hint_client)   # FastAPI / Starlette
    app = ErrorOwnershipMiddleware(app, hints=hint_client)             # any ASGI app

The middleware serves each HTTP request with a Ledger in the OpenTelemetry
context and sets ``Error-Claim`` on server-fault responses (5xx by default)
in their ``http.response.start`` message. A handler that set one clean
claim wins; anything else is replaced. ``error_ownership.claim.sent`` and
``error_ownership.claim.reason`` go on the span current when the request came in:
the server span under opentelemetry-instrumentation-asgi or -fastapi. An
exception out of the app, before any response, is answered with a claimed
500 here and raised again, since Starlette's own 500 for it would be sent
outside the middleware, unclaimed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ._client import server_fault
from ._core import LEDGER_KEY, LEDGER_VAR, HintSource, Ledger
from ._server import decide, own_claim
from .ownership import HTTP_CLAIM_HEADER, claim_of_values

__all__ = ["ErrorOwnershipMiddleware", "asgi_operation"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_CLAIM_KEY = HTTP_CLAIM_HEADER.lower().encode()
# What Starlette's ServerErrorMiddleware answers an exception with.
_ERROR_START: Message = {
    "type": "http.response.start",
    "status": 500,
    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21")],
}
_ERROR_BODY: Message = {"type": "http.response.body", "body": b"Internal Server Error"}


def asgi_operation(scope: Scope) -> str:
    """The operation "METHOD /concrete/path", which the hints match to the route."""
    path = (scope.get("root_path") or "") + (scope.get("path") or "")
    return f"{scope.get('method', 'GET')} {path or '/'}"


class ErrorOwnershipMiddleware:
    """ASGI middleware; keyword arguments ``hints``, ``fault`` and
    ``operation(scope) -> str``, as for the WSGI middleware."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hints: HintSource | None = None,
        fault: Callable[[int], bool] = server_fault,
        operation: Callable[[Scope], str] = asgi_operation,
    ) -> None:
        self.app = app
        self.hints = hints
        self.fault = fault
        self.operation = operation

    def _start(self, message: Message, ledger: Ledger, scope: Scope, span: trace.Span) -> None:
        try:
            code = int(message.get("status", 200))
            if code < 200 or not self.fault(code):
                return
            headers = list(message.get("headers") or [])
            values = [bytes(v).decode("latin-1") for k, v in headers if bytes(k).lower() == _CLAIM_KEY]
            if values:
                own = claim_of_values(values)
                if own.value != "missing":
                    own_claim(own, span)
                    return
                headers = [(k, v) for k, v in headers if bytes(k).lower() != _CLAIM_KEY]
            claim = decide(ledger, self.hints, self.operation(scope), code == 504, span)
            headers.append((_CLAIM_KEY, claim.value.encode()))
            message["headers"] = headers
        except Exception:  # the hooks never fail a request
            pass

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        ledger = Ledger()
        span = trace.get_current_span()
        started = False

        async def hooked_send(message: Message) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
                # The server span, also where the instrumentation runs
                # outside the middleware (see wsgi).
                current = trace.get_current_span()
                self._start(message, ledger, scope, current if current.is_recording() else span)
            await send(message)

        token = otel_context.attach(otel_context.set_value(LEDGER_KEY, ledger))
        var_token = LEDGER_VAR.set(ledger)
        try:
            await self.app(scope, receive, hooked_send)
        except Exception:
            # Starlette's ServerErrorMiddleware, outside every middleware
            # added with add_middleware, would answer this 500 itself,
            # past the hooks and without a claim. Answer it here, claimed
            # by the rules, and re-raise for the server to log: it sends
            # nothing once a response has started.
            if not started:
                # Copies: the hooks add their header to the message.
                await hooked_send(dict(_ERROR_START))
                await hooked_send(dict(_ERROR_BODY))
            raise
        finally:
            LEDGER_VAR.reset(var_token)
            otel_context.detach(token)
