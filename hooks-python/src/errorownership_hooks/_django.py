# SPDX-License-Identifier: Apache-2.0

"""The Django middleware the instrumentor puts just after the Django
instrumentation's (_autohooks): the server span is current around it, and
still recording when the response comes back through it, which is not so
where Django's WSGI handler starts the response."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from . import _autohooks
from ._client import server_fault
from ._core import Ledger, ledger_scope
from ._server import decide, own_claim
from .ownership import HTTP_CLAIM_HEADER, claim_of_values

__all__ = ["ErrorOwnershipDjangoMiddleware"]


class ErrorOwnershipDjangoMiddleware:
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        ledger = Ledger()
        with ledger_scope(ledger):
            response = self.get_response(request)
        try:
            code = int(response.status_code)
            if code < 200 or not server_fault(code):
                return response
            span = trace.get_current_span()
            got = response.get(HTTP_CLAIM_HEADER) if response.has_header(HTTP_CLAIM_HEADER) else None
            if got is not None:
                own = claim_of_values([got])
                if own.value != "missing":
                    own_claim(own, span)
                    return response
            operation = f"{request.method} {request.path}"
            response[HTTP_CLAIM_HEADER] = decide(ledger, _autohooks.server_hints(), operation, code == 504, span).value
        except Exception:  # the hooks never fail a request
            pass
        return response
