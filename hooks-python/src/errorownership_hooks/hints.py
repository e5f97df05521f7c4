# SPDX-License-Identifier: Apache-2.0

"""The hint client: polls a collector's ownership hints
(``GET /v1/hints?service=NAME``, docs/design.md §9.3) in a daemon thread and
answers the hooks' questions from the last good document, never waiting on
a fetch.

    from errorownership_hooks.hints import HintClient
    hints = HintClient.start("http://otel-collector:4320", "checkout")

(4320 is the hints extension's default port.) The fetches are made with
``http.client`` under OpenTelemetry's instrumentation suppression (see
``untraced``): a poll is never a span, whichever instrumentation is
installed, and never the child of a caller's span.

Poll again after the response's Cache-Control max-age, else the document's
ttl_seconds, else 30 s, within [1 s, 10 min]; after a failure after 1 s,
doubling to 60 s. ETag / If-None-Match revalidation (an ETag over 1 KiB is
not kept). The last good hints are used for 5 minutes after the collector
last confirmed them; before the first and after that, every edge is
unknown and the budget is the default. Bodies over 1 MiB and fetches over
5 s fail.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from opentelemetry import context as otel_context

from ._vocabulary import (
    EDGE_FIELD_CONFIDENCE,
    EDGE_FIELD_MODE,
    EDGE_FIELD_OPERATION,
    EDGE_FIELD_PEER_ADDRESSES,
    EDGE_FIELD_PEER_OPERATION,
    EDGE_FIELD_PEER_SERVICE,
    EDGE_FIELD_SAMPLES,
    HINTS_FIELD_EDGES,
    HINTS_FIELD_GENERATED_AT,
    HINTS_FIELD_RETRY_BUDGET,
    HINTS_FIELD_SERVICE,
    HINTS_FIELD_TTL_SECONDS,
    HINTS_FIELD_VERSION,
    RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND,
    RETRY_BUDGET_FIELD_RATIO,
)
from .ownership import HINTS_PATH, HINTS_VERSION, Limits, Mode, default_limits, parse_mode

__all__ = ["HintClient", "HintEdge", "Hints", "HintsError", "match_operation"]

DEFAULT_TTL = 30.0
DEFAULT_MAX_STALE = 300.0
MIN_POLL = 1.0
MAX_POLL = 600.0
MAX_ERROR_BACKOFF = 60.0
MAX_BODY = 1 << 20
MAX_ETAG = 1 << 10
DEFAULT_FETCH_TIMEOUT = 5.0


class HintsError(Exception):
    """A fetch that did not give good hints."""


@dataclass(frozen=True)
class HintEdge:
    operation: str
    peer_service: str
    peer_operation: str
    peer_addresses: tuple[str, ...]
    mode: Mode
    confidence: float = 0.0
    samples: int = 0


@dataclass(frozen=True)
class Hints:
    version: int
    service: str
    ttl_seconds: int
    retry_budget: Limits | None
    edges: tuple[HintEdge, ...] = field(default_factory=tuple)

    def budget(self) -> Limits:
        return self.retry_budget if self.retry_budget is not None else default_limits()


def _get(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    v = obj.get(key)
    if v is None:
        return default
    if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise HintsError(f"{key}: not a {kind}")
    if not isinstance(v, kind):
        raise HintsError(f"{key}: not a {kind}")
    return v


def _number(obj: dict[str, Any], key: str) -> float:
    v = _get(obj, key, (int, float), 0)
    return float(v)


def parse_hints(body: bytes, service: str) -> Hints:
    """Decode and validate a hints document for service; HintsError if it
    is not one a sane collector can have meant."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise HintsError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise HintsError("not a JSON object")
    version = _get(doc, HINTS_FIELD_VERSION, int, 0)
    svc = _get(doc, HINTS_FIELD_SERVICE, str, "")
    ttl = _get(doc, HINTS_FIELD_TTL_SECONDS, int, 0)
    gen = _get(doc, HINTS_FIELD_GENERATED_AT, str, "")
    if gen:
        try:
            datetime.fromisoformat(gen.replace("Z", "+00:00"))
        except ValueError:
            raise HintsError("generated_at: not a time") from None
    if version != HINTS_VERSION:
        raise HintsError(f"version {version}, want {HINTS_VERSION}")
    if svc and svc != service:
        raise HintsError(f"hints for service {svc!r}, want {service!r}")
    if ttl < 0:
        raise HintsError("negative ttl_seconds")
    if ttl > 2**63 - 1 or version > 2**63 - 1:
        raise HintsError("a number over int64")
    budget: Limits | None = None
    rb = doc.get(HINTS_FIELD_RETRY_BUDGET)
    if rb is not None:
        if not isinstance(rb, dict):
            raise HintsError("retry_budget: not an object")
        budget = Limits(_number(rb, RETRY_BUDGET_FIELD_RATIO), _number(rb, RETRY_BUDGET_FIELD_MIN_RETRIES_PER_SECOND))
        try:
            budget.validate()
        except ValueError as exc:
            raise HintsError(str(exc)) from None
    raw_edges = _get(doc, HINTS_FIELD_EDGES, list, [])
    edges = []
    for e in raw_edges:
        if not isinstance(e, dict):
            raise HintsError("edge: not an object")
        addrs = _get(e, EDGE_FIELD_PEER_ADDRESSES, list, [])
        if not all(isinstance(a, str) for a in addrs):
            raise HintsError("peer_addresses: not strings")
        mode = e.get(EDGE_FIELD_MODE)
        if mode is not None and not isinstance(mode, str):
            raise HintsError("mode: not a string")
        edges.append(
            HintEdge(
                operation=_get(e, EDGE_FIELD_OPERATION, str, ""),
                peer_service=_get(e, EDGE_FIELD_PEER_SERVICE, str, ""),
                peer_operation=_get(e, EDGE_FIELD_PEER_OPERATION, str, ""),
                peer_addresses=tuple(addrs),
                mode=parse_mode(mode),
                confidence=_number(e, EDGE_FIELD_CONFIDENCE),
                samples=int(_get(e, EDGE_FIELD_SAMPLES, int, 0)),
            )
        )
    return Hints(version, svc, ttl, budget, tuple(edges))


# ---------------------------------------------------------------------------
# Poll timing

_MAX_AGE = re.compile(r"^\s*max-age\s*$", re.IGNORECASE)


def _seconds(n: int) -> float:
    return MAX_POLL + 1 if n > MAX_POLL else float(n)


def _max_age(cc: str) -> float | None:
    for part in cc.split(","):
        k, sep, v = part.strip().partition("=")
        if not sep or k.lower() != "max-age":
            continue
        v = v.strip('"')
        if not re.fullmatch(r"[+-]?[0-9]+", v):
            return None
        n = int(v)
        if n < 0:
            return None
        return _seconds(n)
    return None


def poll_after(cache_control: str | None, hints: Hints | None) -> float:
    d = DEFAULT_TTL
    age = _max_age(cache_control or "")
    if age is not None:
        d = age
    elif hints is not None and hints.ttl_seconds > 0:
        d = _seconds(hints.ttl_seconds)
    return min(max(d, MIN_POLL), MAX_POLL)


# ---------------------------------------------------------------------------
# Matching


def _split_port(addr: str) -> tuple[str, bool]:
    """net.SplitHostPort: (host, True) when addr has a non-empty port."""
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0 or addr[end + 1 : end + 2] != ":":
            return addr, False
        host, port = addr[1:end], addr[end + 2 :]
        if ":" in port:
            return addr, False
    else:
        i = addr.rfind(":")
        if i < 0:
            return addr, False
        host, port = addr[:i], addr[i + 1 :]
        if ":" in host:
            return addr, False
        if "[" in host or "]" in host:
            return addr, False
    if port == "":
        return addr, False
    return host, True


_LITERAL, _ONE, _REST, _END = 0, 1, 2, 3


def _segment_kind(seg: str) -> int:
    if seg == "":
        return _LITERAL
    if seg == "{$}":
        return _END
    if seg[0] == "*":
        return _REST
    if seg[0] == ":" and len(seg) > 1:
        return _ONE
    if seg[0] == "{" and seg[-1] == "}" and len(seg) > 2:
        inner = seg[1:-1]
        if inner.endswith("...") or inner.startswith("*") or inner.endswith(":path"):
            return _REST
        return _ONE
    if seg[0] == "<" and seg[-1] == ">" and len(seg) > 2:
        return _REST if seg.startswith("<path:") else _ONE
    return _LITERAL


def _match_path(pattern: str, path: str) -> bool:
    more = True
    while True:
        seg, psep, prest = pattern.partition("/")
        pmore = psep != ""
        kind = _segment_kind(seg)
        if not pmore and seg == "":
            return more
        if kind == _END:
            return more and path == ""
        if not more:
            return False
        if kind == _REST:
            return True
        qseg, qsep, qrest = path.partition("/")
        qmore = qsep != ""
        if kind == _ONE:
            if qseg == "":
                return False
        elif seg != qseg:
            return False
        if not pmore:
            return not qmore
        pattern, path, more = prest, qrest, qmore


def match_operation(pattern: str, op: str) -> bool:
    """Whether a route pattern, as a framework's server span names it,
    matches a concrete operation "METHOD /path"."""
    if pattern == op:
        return True
    pm, sep, pp = pattern.partition(" ")
    if not sep:
        pm, pp = "", pattern
    om, sep, opath = op.partition(" ")
    if not sep:
        om, opath = "", op
    if pm and pm != om:
        return False
    for i, ch in enumerate(opath):
        if ch in "?#":
            opath = opath[:i]
            break
    if not opath.startswith("/") or pp == "":
        return False
    return _match_path(pp.removeprefix("/"), opath[1:])


class _Index:
    def __init__(self, edges: tuple[HintEdge, ...]) -> None:
        self.edges = edges
        self.by_peer: dict[str, list[int]] = {}
        self.portless: dict[str, list[int]] = {}
        self.ported: dict[str, list[int]] = {}
        for i, e in enumerate(edges):
            self._add(self.by_peer, e.peer_service, i)
            for a in e.peer_addresses:
                if a == e.peer_service:
                    continue
                self._add(self.by_peer, a, i)
                host, ok = _split_port(a)
                self._add(self.ported if ok else self.portless, host if ok else a, i)

    @staticmethod
    def _add(m: dict[str, list[int]], k: str, n: int) -> None:
        lst = m.setdefault(k, [])
        if not lst or lst[-1] != n:
            lst.append(n)

    def mode(self, operation: str, peer: str, peer_operation: str) -> Mode:
        cands = self.by_peer.get(peer)
        if not cands:
            host, ok = _split_port(peer)
            cands = self.portless.get(host) if ok else self.ported.get(peer)
        if not cands:
            return Mode.UNKNOWN
        mine = operation != "" and any(match_operation(self.edges[i].operation, operation) for i in cands)
        opened = closed = unknown = 0
        for i in cands:
            e = self.edges[i]
            if mine and not match_operation(e.operation, operation):
                continue
            if peer_operation and not match_operation(e.peer_operation, peer_operation):
                continue
            if e.mode is Mode.FAIL_OPEN:
                opened += 1
            elif e.mode is Mode.FAIL_CLOSE:
                closed += 1
            else:
                unknown += 1
        if closed:
            return Mode.FAIL_CLOSE
        if opened and not unknown:
            return Mode.FAIL_OPEN
        return Mode.UNKNOWN


@dataclass(frozen=True)
class _State:
    hints: Hints
    index: _Index
    limits: Limits
    checked: float


# ---------------------------------------------------------------------------
# The client

# The keys every instrumentation of opentelemetry-python-contrib reads through
# opentelemetry.instrumentation.utils.is_instrumentation_enabled() and
# is_http_instrumentation_enabled() (urllib, urllib3, requests, httpx, aiohttp,
# ...) and the SDK's exporters set for their own requests. Both live in
# opentelemetry-api's context module (1.28 to now); "suppress_instrumentation"
# is the plain spelling the utils still read for instrumentations older than
# the keys. Taken from the API, so that the hooks need no
# opentelemetry-instrumentation at run time.
_SUPPRESS_KEYS = tuple(
    k
    for k in (
        getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None),
        getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None),
        "suppress_instrumentation",
    )
    if k is not None
)


def untraced() -> otel_context.Context:
    """The context a poll runs in: empty (no caller's span to be the parent
    of anything) with every instrumentation suppressed."""
    ctx = otel_context.Context()
    for k in _SUPPRESS_KEYS:
        ctx = otel_context.set_value(k, True, ctx)
    return ctx


class HintClient:
    """Fetches one service's hints and answers mode() and budget_limits()
    from the last good ones. ``clock`` returns seconds (default
    time.monotonic); ``headers`` are sent with every fetch."""

    def __init__(
        self,
        base_url: str,
        service: str,
        *,
        headers: dict[str, str] | None = None,
        fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
        max_stale: float = DEFAULT_MAX_STALE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        u = urlsplit(base_url.rstrip("/"))
        self._scheme = u.scheme.lower()
        self._host = u.hostname or ""
        self._port = u.port
        self._path = (u.path or "") + HINTS_PATH + "?service=" + quote(service, safe="")
        self.service = service
        self._headers = dict(headers or {})
        self._timeout = fetch_timeout
        self._max_stale = max_stale
        self._clock = clock
        self._state: _State | None = None
        self._lock = threading.Lock()
        self._etag = ""
        self._failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: Exception | None = None

    @classmethod
    def start(cls, base_url: str, service: str, **kwargs: Any) -> HintClient:
        """A client whose poller runs in a daemon thread."""
        c = cls(base_url, service, **kwargs)
        c.run_in_background()
        return c

    def run_in_background(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="errorownership-hints", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        delay = 0.0
        while not self._stop.wait(delay):
            delay, _ = self.refresh()

    # -- fetching

    def refresh(self) -> tuple[float, Exception | None]:
        """Fetch once; return when to fetch again (seconds) and the error,
        if the fetch gave no good hints. The fetch is never traced."""
        token = otel_context.attach(untraced())
        try:
            with self._lock:
                try:
                    nxt = self._fetch()
                except Exception as e:  # whatever the collector sends
                    self._failures += 1
                    self.last_error = e
                    return min(float(1 << min(self._failures - 1, 6)), MAX_ERROR_BACKOFF), e
                self._failures = 0
                self.last_error = None
                return nxt, None
        finally:
            otel_context.detach(token)

    def _fetch(self) -> float:
        deadline = time.monotonic() + self._timeout
        if self._scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout
            )
        elif self._scheme == "http":
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        else:
            raise HintsError(f"unsupported scheme {self._scheme!r}")
        try:
            headers = dict(self._headers)
            headers["Accept"] = "application/json"
            old = self._state
            revalidate = old is not None and self._etag != ""
            if revalidate:
                headers["If-None-Match"] = self._etag
            conn.request("GET", self._path, headers=headers)
            _remaining(deadline, conn)
            res = conn.getresponse()
            if res.status == 304 and revalidate:
                assert old is not None
                self._state = _State(old.hints, old.index, old.limits, self._clock())
                return poll_after(res.getheader("Cache-Control"), old.hints)
            if res.status != 200:
                raise HintsError(f"status {res.status}")
            body = bytearray()
            while len(body) <= MAX_BODY:
                _remaining(deadline, conn)
                chunk = res.read1(65536) if hasattr(res, "read1") else res.read(65536)
                if not chunk:
                    break
                body += chunk
            if len(body) > MAX_BODY:
                raise HintsError(f"body over {MAX_BODY} bytes")
            h = parse_hints(bytes(body), self.service)
            self._state = _State(h, _Index(h.edges), h.budget(), self._clock())
            etag = res.getheader("ETag") or ""
            self._etag = etag if len(etag) <= MAX_ETAG else ""
            return poll_after(res.getheader("Cache-Control"), h)
        finally:
            conn.close()

    # -- answering

    def _current(self) -> _State | None:
        st = self._state
        if st is None or self._clock() - st.checked > self._max_stale:
            return None
        return st

    def mode(self, operation: str, peer_service: str, peer_operation: str) -> Mode:
        """The mode of the edge (operation → peer, peer_operation); ""
        where not known. Never waits on a fetch."""
        st = self._current()
        if st is None:
            return Mode.UNKNOWN
        return st.index.mode(operation, peer_service, peer_operation)

    def budget_limits(self) -> Limits:
        st = self._current()
        return st.limits if st is not None else default_limits()

    def hints(self) -> Hints | None:
        st = self._current()
        return st.hints if st is not None else None


def _remaining(deadline: float, conn: http.client.HTTPConnection) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HintsError("fetch timed out")
    if conn.sock is not None:
        conn.sock.settimeout(left)
