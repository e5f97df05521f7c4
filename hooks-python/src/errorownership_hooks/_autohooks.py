# SPDX-License-Identifier: Apache-2.0

"""The patches the instrumentor applies (instrumentor.py).

opentelemetry-instrument loads the ``opentelemetry_instrumentor`` entry
points in the order importlib.metadata finds them (distribution by
distribution, as the file system lists site-packages: no promised order),
so nothing here wraps a function a contrib instrumentation wraps. Each
client gets two patches, one strictly above the function the contrib
instrumentation wraps (the retry loop: each attempt goes through the
instrumented function, so each is its own CLIENT span) and one strictly
below it (inside that span: it settles the attempt and puts its attributes
on the span):

  library          contrib wraps                      retries in                     settles in
  requests         Session.send                       Session.request                HTTPAdapter.send
  httpx            HTTPTransport.handle_request (and  Client._send_single_request    httpcore ConnectionPool
                   its async twin)                    (and its async twin)           .handle_request (async twin)
  urllib.request   OpenerDirector.open                urllib.request.urlopen         AbstractHTTPHandler.do_open
  urllib3          HTTPConnectionPool.urlopen         RequestMethods.request         HTTPConnectionPool._make_request

The servers: Flask's instrumentation wraps each app's ``wsgi_app`` when
the app is made, and ``Flask.__call__`` calls it: the hooks go around it
there (the server span is current when the response starts). The ASGI and
WSGI instrumentations' middleware get the hooks as the app they wrap
(Starlette's and FastAPI's instrumentations add the ASGI one). Django's
instrumentation puts its middleware first in settings.MIDDLEWARE; the
hooks' goes just after it when Django loads its middleware.

A call through the code-level hooks (their Session, Transport, middleware)
is left to them; a call made while instrumentation is suppressed (an
exporter's, the hint client's) is left alone.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import time
from collections.abc import Callable
from contextvars import Token
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import is_http_instrumentation_enabled, is_instrumentation_enabled

from ._client import (
    Attempt,
    ClientConfig,
    LogicalCall,
    http_operation,
    idempotent,
    peer_address,
    server_fault,
)
from ._core import HintSource
from .ownership import HTTP_CLAIM_HEADER, HTTP_RETRY_ATTEMPT_HEADER

_ATTEMPT_KEY = otel_context.create_key("errorownership.zerocode.attempt")


@dataclass
class Settings:
    hints: HintSource
    server_hints: HintSource | None
    max_attempts: int


_patches: list[tuple[Any, str, Any]] = []
_cfg: ClientConfig | None = None
_server_hints: HintSource | None = None


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    orig = owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)
    setattr(owner, name, make(orig))
    _patches.append((owner, name, orig))


def install(s: Settings) -> None:
    global _cfg, _server_hints
    _cfg = ClientConfig(hints=s.hints, max_attempts=s.max_attempts)
    _server_hints = s.server_hints
    for hook in (_flask, _asgi, _wsgi, _django, _requests, _httpx, _urllib, _urllib3):
        try:
            hook()
        except ImportError:
            pass  # the library is not installed
        except Exception:  # a library version we do not know: never stop the service
            logging.getLogger("errorownership_hooks").warning(
                "errorownership: cannot hook %s; its calls are left as they are. Report the version in use.",
                hook.__name__.strip("_"),
                exc_info=True,
            )


def uninstall() -> None:
    while _patches:
        owner, name, orig = _patches.pop()
        setattr(owner, name, orig)


def _enabled() -> bool:
    return _cfg is not None and is_instrumentation_enabled() and is_http_instrumentation_enabled()


class _Headers:
    """Case-insensitive ``in`` over a mapping's keys, for idempotent()."""

    def __init__(self, *maps: Any) -> None:
        self._keys = {str(k).lower() for m in maps if m for k in m}

    def __contains__(self, key: object) -> bool:
        return str(key).lower() in self._keys


# ---------------------------------------------------------------------------
# The attempt loop


def _current(kind: str) -> Attempt | None:
    v = otel_context.get_value(_ATTEMPT_KEY)
    if isinstance(v, tuple) and v[0] == kind:
        a: Attempt = v[1]
        return a
    return None


def _settle_inside(kind: str, failed: bool, claims: list[str] | None) -> None:
    """Settle the current attempt of kind where the instrumentation's span is
    current, and annotate that span."""
    a = _current(kind)
    if a is None:
        return
    try:
        a.settle(failed, claims)
        a.annotate()
    except Exception:  # the hooks never fail a call
        pass


def _policy(method: str, headers: _Headers, replayable: bool) -> bool:
    try:
        return idempotent(method, headers) and replayable
    except Exception:
        return False


class _Loop:
    """One logical call's attempts: begin() before each, after() with its
    answer; after() tells whether to stop, having waited the backoff when
    not."""

    def __init__(self, kind: str, method: str, url: str, has_policy: bool) -> None:
        assert _cfg is not None
        self.kind = kind
        self.method = method.upper()
        self.url = url
        self.lc = LogicalCall(_cfg, peer_address(url), has_policy, http=True)
        self.n = 0
        self.a = Attempt(self.lc, 0)

    def begin(self) -> Token[Context]:
        self.a = Attempt(self.lc, self.n)
        return otel_context.attach(otel_context.set_value(_ATTEMPT_KEY, (self.kind, self.a)))

    def end(self, token: Token[Context], status: int | None, claims: list[str] | None) -> bool:
        """status None: no answer. True: done, return what came."""
        otel_context.detach(token)
        a, lc = self.a, self.lc
        if status is not None:
            a.settle(server_fault(status), claims)
        else:
            a.settle(True, None)
        if not a.failed:
            lc.end_ok()
            return True
        lc.peer_operation = http_operation(self.method, self.url)
        if a.decision.value != "retried":
            lc.end(a.outcome())
            return True
        self.n += 1
        return False


def _claims(values: list[str] | None) -> list[str]:
    # http.client keeps a field's trailing whitespace (see requests.py).
    return [v.strip(" \t") for v in values or []]


# ---------------------------------------------------------------------------
# Servers


def _flask() -> None:
    import flask

    from .wsgi import ErrorOwnershipMiddleware

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def __call__(self: Any, environ: Any, start_response: Any) -> Any:
            if _cfg is None or isinstance(self.wsgi_app, ErrorOwnershipMiddleware):
                return orig(self, environ, start_response)
            mw = ErrorOwnershipMiddleware(functools.partial(orig, self), hints=_server_hints)
            return mw(environ, start_response)

        return __call__

    _patch(flask.Flask, "__call__", make)


def _wrap_middleware_init(cls: Any, hooks: Any) -> None:
    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def __init__(self: Any, app: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, app, *args, **kwargs)
            if _cfg is not None and not isinstance(self.app, hooks):
                self.app = hooks(self.app, hints=_server_hints)

        return __init__

    _patch(cls, "__init__", make)


def _asgi() -> None:
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    from .asgi import ErrorOwnershipMiddleware

    _wrap_middleware_init(OpenTelemetryMiddleware, ErrorOwnershipMiddleware)


def _wsgi() -> None:
    from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

    from .wsgi import ErrorOwnershipMiddleware

    _wrap_middleware_init(OpenTelemetryMiddleware, ErrorOwnershipMiddleware)


_DJANGO_OTEL = "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"
_DJANGO_HOOKS = "errorownership_hooks._django.ErrorOwnershipDjangoMiddleware"


def _django() -> None:
    from django.core.handlers.base import BaseHandler

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def load_middleware(self: Any, *args: Any, **kwargs: Any) -> Any:
            from django.conf import settings

            try:
                mws = list(getattr(settings, "MIDDLEWARE", None) or [])
                if _cfg is not None and _DJANGO_HOOKS not in mws:
                    at = mws.index(_DJANGO_OTEL) + 1 if _DJANGO_OTEL in mws else 0
                    mws.insert(at, _DJANGO_HOOKS)
                    settings.MIDDLEWARE = mws
            except Exception:  # the hooks never stop a service
                pass
            return orig(self, *args, **kwargs)

        return load_middleware

    _patch(BaseHandler, "load_middleware", make)


def server_hints() -> HintSource | None:
    return _server_hints


# ---------------------------------------------------------------------------
# requests

_REPLAYABLE = (type(None), bytes, str, dict, list, tuple)


def _requests() -> None:
    import requests
    from requests.adapters import HTTPAdapter

    failures = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.ChunkedEncodingError,
    )

    def make_request(orig: Any) -> Any:
        @functools.wraps(orig)
        def request(self: Any, method: str, url: Any, *args: Any, **kwargs: Any) -> Any:
            if args or not _enabled() or hasattr(self, "_eo_cfg"):
                return orig(self, method, url, *args, **kwargs)
            headers = kwargs.get("headers") or {}
            replayable = isinstance(kwargs.get("data"), _REPLAYABLE) and kwargs.get("files") is None
            has_policy = _policy(str(method), _Headers(headers, self.headers), replayable)
            loop = _Loop("requests", str(method), str(url), has_policy)
            while True:
                token = loop.begin()
                resp = err = None
                try:
                    resp = orig(self, method, url, **kwargs)
                except failures as e:
                    err = e
                except BaseException:
                    otel_context.detach(token)
                    raise
                got = None if resp is None else resp.headers.get(HTTP_CLAIM_HEADER)
                done = loop.end(
                    token, None if resp is None else resp.status_code, _claims(None if got is None else [got])
                )
                if done:
                    if err is not None:
                        raise err
                    return resp
                if resp is not None:
                    resp.close()
                if loop.a.delay > 0:
                    time.sleep(loop.a.delay)
                kwargs["headers"] = {**dict(headers), HTTP_RETRY_ATTEMPT_HEADER: str(loop.n)}

        return request

    def make_send(orig: Any) -> Any:
        @functools.wraps(orig)
        def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            if _current("requests") is None:
                return orig(self, request, *args, **kwargs)
            try:
                resp = orig(self, request, *args, **kwargs)
            except failures:
                _settle_inside("requests", True, None)
                raise
            got = resp.headers.get(HTTP_CLAIM_HEADER)
            _settle_inside("requests", server_fault(resp.status_code), _claims(None if got is None else [got]))
            return resp

        return send

    _patch(requests.Session, "request", make_request)
    _patch(HTTPAdapter, "send", make_send)


# ---------------------------------------------------------------------------
# httpx (over httpcore)


def _httpx() -> None:
    import httpcore
    import httpx

    from .httpx import _Base, _core_claim_values, _retry_request

    def policy(request: httpx.Request) -> bool:
        return _policy(request.method, _Headers(request.headers), isinstance(request.stream, httpx.ByteStream))

    def ours(client: Any, request: httpx.Request) -> bool:
        if not _enabled():
            return False
        try:
            return not isinstance(client._transport_for_url(request.url), _Base)
        except Exception:
            return False

    def make_sync(orig: Any) -> Any:
        @functools.wraps(orig)
        def _send_single_request(self: Any, request: httpx.Request) -> Any:
            if not ours(self, request):
                return orig(self, request)
            loop = _Loop("httpx", request.method, str(request.url), policy(request))
            attempt_req = request
            while True:
                token = loop.begin()
                resp: httpx.Response | None = None
                err: httpx.TransportError | None = None
                try:
                    resp = orig(self, attempt_req)
                except httpx.TransportError as e:
                    err = e
                except BaseException:
                    otel_context.detach(token)
                    raise
                status = None if resp is None else resp.status_code
                if loop.end(token, status, None if resp is None else resp.headers.get_list(HTTP_CLAIM_HEADER)):
                    if err is not None:
                        raise err
                    return resp
                if resp is not None:
                    resp.close()
                if loop.a.delay > 0:
                    time.sleep(loop.a.delay)
                attempt_req = _retry_request(request, loop.n)

        return _send_single_request

    def make_async(orig: Any) -> Any:
        @functools.wraps(orig)
        async def _send_single_request(self: Any, request: httpx.Request) -> Any:
            if not ours(self, request):
                return await orig(self, request)
            loop = _Loop("httpx", request.method, str(request.url), policy(request))
            attempt_req = request
            while True:
                token = loop.begin()
                resp: httpx.Response | None = None
                err: httpx.TransportError | None = None
                try:
                    resp = await orig(self, attempt_req)
                except httpx.TransportError as e:
                    err = e
                except BaseException:
                    otel_context.detach(token)
                    raise
                status = None if resp is None else resp.status_code
                if loop.end(token, status, None if resp is None else resp.headers.get_list(HTTP_CLAIM_HEADER)):
                    if err is not None:
                        raise err
                    return resp
                if resp is not None:
                    await resp.aclose()
                if loop.a.delay > 0:
                    await asyncio.sleep(loop.a.delay)
                attempt_req = _retry_request(request, loop.n)

        return _send_single_request

    def make_pool(orig: Any) -> Any:
        @functools.wraps(orig)
        def handle_request(self: Any, request: Any) -> Any:
            if _current("httpx") is None:
                return orig(self, request)
            try:
                resp = orig(self, request)
            except Exception:
                _settle_inside("httpx", True, None)
                raise
            _settle_inside("httpx", server_fault(int(resp.status)), _core_claim_values(resp.headers))
            return resp

        return handle_request

    def make_async_pool(orig: Any) -> Any:
        @functools.wraps(orig)
        async def handle_async_request(self: Any, request: Any) -> Any:
            if _current("httpx") is None:
                return await orig(self, request)
            try:
                resp = await orig(self, request)
            except Exception:
                _settle_inside("httpx", True, None)
                raise
            _settle_inside("httpx", server_fault(int(resp.status)), _core_claim_values(resp.headers))
            return resp

        return handle_async_request

    _patch(httpx.Client, "_send_single_request", make_sync)
    _patch(httpx.AsyncClient, "_send_single_request", make_async)
    _patch(httpcore.ConnectionPool, "handle_request", make_pool)
    _patch(httpcore.AsyncConnectionPool, "handle_async_request", make_async_pool)


# ---------------------------------------------------------------------------
# urllib.request


def _urllib() -> None:
    import urllib.request
    from urllib.error import HTTPError, URLError

    def attempt_request(req: urllib.request.Request, n: int) -> urllib.request.Request:
        r = copy.copy(req)
        r.headers = dict(req.headers)
        r.unredirected_hdrs = dict(req.unredirected_hdrs)
        r.add_header(HTTP_RETRY_ATTEMPT_HEADER, str(n))
        return r

    def make_urlopen(orig: Any) -> Any:
        @functools.wraps(orig)
        def urlopen(url: Any, data: Any = None, *args: Any, **kwargs: Any) -> Any:
            if not _enabled():
                return orig(url, data, *args, **kwargs)
            req = url if isinstance(url, urllib.request.Request) else urllib.request.Request(url)
            if data is not None:
                req = copy.copy(req)
                req.data = data
            body = req.data
            replayable = body is None or isinstance(body, (bytes, bytearray))
            has_policy = _policy(req.get_method(), _Headers(req.headers, req.unredirected_hdrs), replayable)
            loop = _Loop("urllib", req.get_method(), req.full_url, has_policy)
            attempt_req = req
            while True:
                token = loop.begin()
                resp: Any = None
                err: BaseException | None = None
                status: int | None = None
                claims: list[str] | None = None
                try:
                    resp = orig(attempt_req, None, *args, **kwargs)
                    status = int(resp.status)
                except HTTPError as e:
                    err, status = e, int(e.code)
                    claims = _claims((e.headers.get_all(HTTP_CLAIM_HEADER) if e.headers is not None else None) or [])
                except (URLError, OSError) as e:
                    err = e
                except BaseException:
                    otel_context.detach(token)
                    raise
                if resp is not None:
                    claims = _claims(resp.headers.get_all(HTTP_CLAIM_HEADER) or [])
                if loop.end(token, status, claims):
                    if err is not None:
                        raise err
                    return resp
                if isinstance(err, HTTPError):
                    err.close()
                if loop.a.delay > 0:
                    time.sleep(loop.a.delay)
                attempt_req = attempt_request(req, loop.n)

        return urlopen

    def make_do_open(orig: Any) -> Any:
        @functools.wraps(orig)
        def do_open(self: Any, http_class: Any, req: Any, **kwargs: Any) -> Any:
            if _current("urllib") is None:
                return orig(self, http_class, req, **kwargs)
            try:
                r = orig(self, http_class, req, **kwargs)
            except Exception:
                _settle_inside("urllib", True, None)
                raise
            _settle_inside("urllib", server_fault(int(r.status)), _claims(r.headers.get_all(HTTP_CLAIM_HEADER) or []))
            return r

        return do_open

    _patch(urllib.request, "urlopen", make_urlopen)
    _patch(urllib.request.AbstractHTTPHandler, "do_open", make_do_open)


# ---------------------------------------------------------------------------
# urllib3


def _urllib3() -> None:
    import urllib3
    from urllib3.connectionpool import HTTPConnectionPool

    try:
        from urllib3._request_methods import RequestMethods
    except ImportError:  # urllib3 1.x
        from urllib3.request import RequestMethods  # type: ignore[no-redef,import-not-found]

    failures = (urllib3.exceptions.HTTPError, OSError)

    def make_request(orig: Any) -> Any:
        @functools.wraps(orig)
        def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if args or not _enabled():
                return orig(self, method, url, *args, **kwargs)
            full = url
            if isinstance(self, HTTPConnectionPool) and url.startswith("/"):
                full = f"{self.scheme}://{self.host}:{self.port}{url}"
            headers = kwargs.get("headers")
            replayable = isinstance(kwargs.get("body"), (type(None), bytes, str))
            has_policy = _policy(method, _Headers(headers if headers is not None else self.headers), replayable)
            loop = _Loop("urllib3", method, full, has_policy)
            while True:
                token = loop.begin()
                resp: Any = None
                err: BaseException | None = None
                try:
                    resp = orig(self, method, url, **kwargs)
                except failures as e:
                    err = e
                except BaseException:
                    otel_context.detach(token)
                    raise
                status = None if resp is None else int(resp.status)
                claims = None if resp is None else _claims(resp.headers.getlist(HTTP_CLAIM_HEADER))
                if loop.end(token, status, claims):
                    if err is not None:
                        raise err
                    return resp
                if resp is not None:
                    resp.drain_conn()
                    resp.release_conn()
                if loop.a.delay > 0:
                    time.sleep(loop.a.delay)
                base = headers if headers is not None else self.headers
                kwargs["headers"] = {**dict(base), HTTP_RETRY_ATTEMPT_HEADER: str(loop.n)}

        return request

    def make_make_request(orig: Any) -> Any:
        @functools.wraps(orig)
        def _make_request(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _current("urllib3") is None:
                return orig(self, *args, **kwargs)
            try:
                r = orig(self, *args, **kwargs)
            except Exception:
                _settle_inside("urllib3", True, None)
                raise
            _settle_inside("urllib3", server_fault(int(r.status)), _claims(r.headers.getlist(HTTP_CLAIM_HEADER)))
            return r

        return _make_request

    _patch(RequestMethods, "request", make_request)
    _patch(HTTPConnectionPool, "_make_request", make_make_request)
