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

gRPC (unary-unary) the way the library path composes it: the gRPC client
instrumentation wraps grpc.insecure_channel / secure_channel and puts its
interceptor on the channel with the intercept_channel its module holds;
that name, patched, puts the hooks' ClientInterceptor around the result and
its attempt_interceptor under it. Its server instrumentation wraps
grpc.server, which calls grpc._server.create_server: patched, it appends
the hooks' ServerInterceptor, last, so inside the instrumentation's.

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
from collections.abc import Awaitable, Callable
from contextvars import Token
from dataclasses import dataclass, replace
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
    for hook in (_flask, _asgi, _wsgi, _django, _grpc_server, _requests, _httpx, _urllib, _urllib3, _grpc_client):
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
# The attempt loop and the settling, alike for every client library


@dataclass(frozen=True)
class _Lib:
    """What the hooks need of one client library; all else is the same for
    every library."""

    kind: str
    # What the call above the instrumentation raises for an attempt that may
    # be retried: no answer, or one the exception carries (answering).
    failures: tuple[type[BaseException], ...]
    # The status and the claim values of a response (or of an answering
    # exception).
    answer: Callable[[Any], tuple[int, list[str]]]
    # Frees an answer that is not handed back (its connection goes back to
    # the pool); may return an awaitable.
    release: Callable[[Any], Any]
    # What the function below the instrumentation raises with no answer.
    inner_failures: tuple[type[BaseException], ...] = (Exception,)
    # The answer of what that function returns, when it differs from answer.
    inner_answer: Callable[[Any], tuple[int, list[str]]] | None = None
    answering: tuple[type[BaseException], ...] = ()


def _current(kind: str) -> Attempt | None:
    v = otel_context.get_value(_ATTEMPT_KEY)
    if isinstance(v, tuple) and v[0] == kind:
        a: Attempt = v[1]
        return a
    return None


class _Inside:
    """Around the function below the instrumentation's, where its span is
    current: settles the current attempt of the library from what came and
    annotates that span. ``with _Inside(lib) as i: i.got = f(...)``"""

    __slots__ = ("got", "lib")

    def __init__(self, lib: _Lib) -> None:
        self.lib = lib
        self.got: Any = None

    def __enter__(self) -> _Inside:
        return self

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        a = _current(self.lib.kind)
        if a is None or (exc is not None and not isinstance(exc, self.lib.inner_failures)):
            return
        try:
            if exc is not None:
                a.settle(True, None)
            else:
                status, claims = (self.lib.inner_answer or self.lib.answer)(self.got)
                a.settle(server_fault(status), claims)
            a.annotate()
        except Exception:  # the hooks never fail a call
            pass


def _settling(lib: _Lib) -> Callable[[Any], Any]:
    """The patch of the function below the instrumentation's (sync or async)."""

    def make(orig: Any) -> Any:
        if asyncio.iscoroutinefunction(orig):

            @functools.wraps(orig)
            async def settling_async(*args: Any, **kwargs: Any) -> Any:
                with _Inside(lib) as inside:
                    inside.got = await orig(*args, **kwargs)
                return inside.got

            return settling_async

        @functools.wraps(orig)
        def settling(*args: Any, **kwargs: Any) -> Any:
            with _Inside(lib) as inside:
                inside.got = orig(*args, **kwargs)
            return inside.got

        return settling

    return make


def _policy(method: str, headers: _Headers, replayable: bool) -> bool:
    try:
        return idempotent(method, headers) and replayable
    except Exception:
        return False


class _Loop:
    """One logical call's attempts, above the instrumentation's function:
    ``with loop: loop.got = send(...)`` for each (the attempt in the
    context), then done() settles it and tells whether it is the last."""

    def __init__(self, lib: _Lib, method: str, url: str, has_policy: bool) -> None:
        assert _cfg is not None
        self.lib = lib
        self.method = method.upper()
        self.url = url
        self.lc = LogicalCall(_cfg, peer_address(url), has_policy, http=True)
        self.n = 0
        self.a = Attempt(self.lc, 0)
        self.got: Any = None
        self.err: BaseException | None = None
        self._token: Token[Context] | None = None

    def __enter__(self) -> _Loop:
        self.a = Attempt(self.lc, self.n)
        self.got = self.err = None
        self._token = otel_context.attach(otel_context.set_value(_ATTEMPT_KEY, (self.lib.kind, self.a)))
        return self

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None
        if isinstance(exc, self.lib.failures):
            self.err = exc
            return True
        return False

    def _answered(self) -> Any:
        """The response (or the answering exception), None: no answer."""
        if self.err is None:
            return self.got
        return self.err if isinstance(self.err, self.lib.answering) else None

    def done(self) -> bool:
        """True: hand back what came (result()). False: the next attempt is
        due after release() and a.delay."""
        a, lc = self.a, self.lc
        got = self._answered()
        if got is None:
            a.settle(True, None)
        else:
            status, claims = self.lib.answer(got)
            a.settle(server_fault(status), claims)
        if not a.failed:
            lc.end_ok()
            return True
        lc.peer_operation = http_operation(self.method, self.url)
        if a.decision.value != "retried":
            lc.end(a.outcome())
            return True
        self.n += 1
        return False

    def result(self) -> Any:
        if self.err is not None:
            raise self.err
        return self.got

    def release(self) -> Any:
        got = self._answered()
        return None if got is None else self.lib.release(got)


def _retry(loop: _Loop, send: Callable[[int], Any]) -> Any:
    """send(n) sends attempt n through the instrumented function."""
    while True:
        with loop:
            loop.got = send(loop.n)
        if loop.done():
            return loop.result()
        loop.release()
        if loop.a.delay > 0:
            time.sleep(loop.a.delay)


async def _retry_async(loop: _Loop, send: Callable[[int], Awaitable[Any]]) -> Any:
    while True:
        with loop:
            loop.got = await send(loop.n)
        if loop.done():
            return loop.result()
        released = loop.release()
        if released is not None:
            await released
        await asyncio.sleep(loop.a.delay)


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


def _grpc_server() -> None:
    from grpc import _server

    from .grpc import ServerInterceptor

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def create_server(thread_pool: Any, handlers: Any, interceptors: Any, *args: Any, **kwargs: Any) -> Any:
            if _cfg is not None and not any(isinstance(i, ServerInterceptor) for i in interceptors):
                # Last, so inside the instrumentation's interceptor, whose span is current.
                interceptors = (*interceptors, ServerInterceptor(hints=_server_hints))
            return orig(thread_pool, handlers, interceptors, *args, **kwargs)

        return create_server

    _patch(_server, "create_server", make)


def server_hints() -> HintSource | None:
    return _server_hints


# ---------------------------------------------------------------------------
# The clients: where each one's retry loop and settling go


_REPLAYABLE = (type(None), bytes, str, dict, list, tuple)


def _with_attempt(kwargs: dict[str, Any], headers: Any, n: int) -> dict[str, Any]:
    """The keyword arguments of attempt n: from the second on, headers with
    the retry attempt's."""
    if n == 0:
        return kwargs
    return {**kwargs, "headers": {**dict(headers), HTTP_RETRY_ATTEMPT_HEADER: str(n)}}


def _requests() -> None:
    import requests
    from requests.adapters import HTTPAdapter

    failures = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.ChunkedEncodingError,
    )

    def answer(r: Any) -> tuple[int, list[str]]:
        got = r.headers.get(HTTP_CLAIM_HEADER)
        return r.status_code, _claims(None if got is None else [got])

    lib = _Lib("requests", failures, answer, lambda r: r.close(), inner_failures=failures)

    def make_request(orig: Any) -> Any:
        @functools.wraps(orig)
        def request(self: Any, method: str, url: Any, *args: Any, **kwargs: Any) -> Any:
            if args or not _enabled() or hasattr(self, "_eo_cfg"):
                return orig(self, method, url, *args, **kwargs)
            headers = kwargs.get("headers") or {}
            replayable = isinstance(kwargs.get("data"), _REPLAYABLE) and kwargs.get("files") is None
            has_policy = _policy(str(method), _Headers(headers, self.headers), replayable)

            lp = _Loop(lib, str(method), str(url), has_policy)
            return _retry(lp, lambda n: orig(self, method, url, **_with_attempt(kwargs, headers, n)))

        return request

    _patch(requests.Session, "request", make_request)
    _patch(HTTPAdapter, "send", _settling(lib))


def _httpx() -> None:
    import httpcore
    import httpx

    from .httpx import _Base, _core_claim_values, _retry_request

    lib = _Lib(
        "httpx",
        (httpx.TransportError,),
        lambda r: (r.status_code, r.headers.get_list(HTTP_CLAIM_HEADER)),
        lambda r: r.close(),
        inner_answer=lambda r: (int(r.status), _core_claim_values(r.headers)),
    )
    async_lib = replace(lib, release=lambda r: r.aclose())

    def loop(client: Any, request: httpx.Request, lib: _Lib) -> _Loop | None:
        """The call's loop, None where the hooks leave it alone."""
        if not _enabled():
            return None
        try:
            if isinstance(client._transport_for_url(request.url), _Base):
                return None  # the code-level hooks' transport
        except Exception:
            return None
        replayable = isinstance(request.stream, httpx.ByteStream)
        return _Loop(
            lib, request.method, str(request.url), _policy(request.method, _Headers(request.headers), replayable)
        )

    def make_sync(orig: Any) -> Any:
        @functools.wraps(orig)
        def _send_single_request(self: Any, request: httpx.Request) -> Any:
            lp = loop(self, request, lib)
            if lp is None:
                return orig(self, request)
            return _retry(lp, lambda n: orig(self, request if n == 0 else _retry_request(request, n)))

        return _send_single_request

    def make_async(orig: Any) -> Any:
        @functools.wraps(orig)
        async def _send_single_request(self: Any, request: httpx.Request) -> Any:
            lp = loop(self, request, async_lib)
            if lp is None:
                return await orig(self, request)
            return await _retry_async(lp, lambda n: orig(self, request if n == 0 else _retry_request(request, n)))

        return _send_single_request

    _patch(httpx.Client, "_send_single_request", make_sync)
    _patch(httpx.AsyncClient, "_send_single_request", make_async)
    _patch(httpcore.ConnectionPool, "handle_request", _settling(lib))
    _patch(httpcore.AsyncConnectionPool, "handle_async_request", _settling(lib))


def _urllib() -> None:
    import urllib.request
    from urllib.error import HTTPError

    def answer(r: Any) -> tuple[int, list[str]]:
        # A response, or an HTTPError (whose headers may be missing).
        return int(r.status), _claims((r.headers.get_all(HTTP_CLAIM_HEADER) if r.headers is not None else None) or [])

    # URLError is an OSError; so is HTTPError, which answers.
    lib = _Lib("urllib", (OSError,), answer, lambda e: e.close(), answering=(HTTPError,))

    def attempt_request(req: urllib.request.Request, n: int) -> urllib.request.Request:
        if n == 0:
            return req
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
            lp = _Loop(lib, req.get_method(), req.full_url, has_policy)
            return _retry(lp, lambda n: orig(attempt_request(req, n), None, *args, **kwargs))

        return urlopen

    _patch(urllib.request, "urlopen", make_urlopen)
    _patch(urllib.request.AbstractHTTPHandler, "do_open", _settling(lib))


def _urllib3() -> None:
    import urllib3
    from urllib3.connectionpool import HTTPConnectionPool

    try:
        from urllib3._request_methods import RequestMethods
    except ImportError:  # urllib3 1.x
        from urllib3.request import RequestMethods  # type: ignore[no-redef,import-not-found]

    def release(r: Any) -> None:
        r.drain_conn()
        r.release_conn()

    lib = _Lib(
        "urllib3",
        (urllib3.exceptions.HTTPError, OSError),
        lambda r: (int(r.status), _claims(r.headers.getlist(HTTP_CLAIM_HEADER))),
        release,
    )

    def make_request(orig: Any) -> Any:
        @functools.wraps(orig)
        def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if args or not _enabled():
                return orig(self, method, url, *args, **kwargs)
            full = url
            if isinstance(self, HTTPConnectionPool) and url.startswith("/"):
                full = f"{self.scheme}://{self.host}:{self.port}{url}"
            headers = kwargs.get("headers")
            base = headers if headers is not None else self.headers
            replayable = isinstance(kwargs.get("body"), (type(None), bytes, str))
            has_policy = _policy(method, _Headers(base), replayable)

            lp = _Loop(lib, method, full, has_policy)
            return _retry(lp, lambda n: orig(self, method, url, **_with_attempt(kwargs, base, n)))

        return request

    _patch(RequestMethods, "request", make_request)
    _patch(HTTPConnectionPool, "_make_request", _settling(lib))


def _grpc_client() -> None:
    import grpc
    from opentelemetry.instrumentation import grpc as otel_grpc

    from .grpc import ClientInterceptor

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def intercept_channel(channel: Any, *interceptors: Any) -> Any:
            if _cfg is None:
                return orig(channel, *interceptors)
            target = getattr(channel, "_target", b"")
            hooks = ClientInterceptor._sharing(target.decode() if isinstance(target, bytes) else str(target), _cfg)
            inner = grpc.intercept_channel(channel, hooks.attempt_interceptor)
            return grpc.intercept_channel(orig(inner, *interceptors), hooks)

        return intercept_channel

    _patch(otel_grpc, "intercept_channel", make)
