# SPDX-License-Identifier: Apache-2.0

"""The zero-code path: the built wheel in .venv-zerocode (Makefile:
hooks-deps) with the contrib instrumentations, and tests/zerocode/app.py,
a service with no error-ownership code, run in a child process under
``opentelemetry-instrument``. The callees and the hints server run here.

client.json through requests, httpx (sync and async), urllib.request and
urllib3; server.json on Flask (its dependency called through each client,
urllib.request among them), Starlette and Django; grpc.json on a grpcio
server and its channels; the disable switch; the overhead against
opentelemetry-instrument alone."""

from __future__ import annotations

import http.client
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Callee, GrpcCallee, load
from hintserver import HintServer

HERE = Path(__file__).resolve().parent
VENV = Path(os.environ.get("ZEROCODE_VENV") or HERE.parent / ".venv-zerocode")
APP = HERE / "zerocode" / "app.py"
CLIENT = load("client.json")["cases"]
SERVER = load("server.json")["cases"]
GRPC_CLIENT, GRPC_SERVER = (load("grpc.json")[k]["cases"] for k in ("client", "server"))
KINDS = ["requests", "httpx", "httpx-async", "urllib", "urllib3"]


class Child:
    """app.py under opentelemetry-instrument, in .venv-zerocode."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, instrument: bool = True) -> None:
        bin_dir = VENV / "bin"
        assert (bin_dir / "opentelemetry-instrument").exists(), (
            f"{VENV} has no opentelemetry-instrument: build it with make hooks-deps (from the repository's root)"
        )
        e = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "ERROROWNERSHIP_", "PYTHON", "VIRTUAL_ENV"))
        }
        e.update(
            OTEL_SERVICE_NAME="checkout",
            OTEL_TRACES_EXPORTER="none",
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
            PYTHONPATH=str(APP.parent),
        )
        e.update(env or {})
        self.proc = subprocess.Popen(
            [str(bin_dir / "opentelemetry-instrument")] * instrument + [str(bin_dir / "python"), str(APP), *args],
            env=e,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"app.py {' '.join(args)} did not start: {line!r}\n{err}")
        self.port = int(line.split()[1])
        # Drain stderr (werkzeug logs each request) so that the child never blocks on it.
        self.stderr: list[str] = []
        assert self.proc.stderr is not None
        threading.Thread(target=self.stderr.extend, args=(self.proc.stderr,), daemon=True).start()

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            h = dict(headers or {})
            data = None
            if body is not None:
                data = json.dumps(body)
                h["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            return r.status, r.headers.get_all("Error-Claim") or [], r.read()
        finally:
            conn.close()

    def spans(self, kind: str) -> list[Any]:
        _, _, body = self.request("GET", "/_spans")
        return [s for s in json.loads(body) if s["kind"] == kind and not s["name"].endswith(("_ready", "_client"))]

    def ready(self) -> dict[str, Any]:
        status, _, body = self.request("GET", "/_ready")
        assert status == 200
        got: dict[str, Any] = json.loads(body)
        return got

    def close(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return "".join(self.stderr)


# ---------------------------------------------------------------------------
# client.json

_GROUPS = {
    "default": {},
    "one attempt": {"ERROROWNERSHIP_MAX_ATTEMPTS": "1"},
    "dry budget": {"ERROROWNERSHIP_RETRY_RATIO": "0", "ERROROWNERSHIP_MIN_RETRIES_PER_SECOND": "0.1"},
}


def _group(tc: dict[str, Any]) -> str:
    if tc.get("max_attempts") == 1:
        return "one attempt"
    if tc.get("budget"):
        assert tc["budget"] == {"ratio": 0, "min_retries_per_second": 0.1}, "a new budget: add its group"
        return "dry budget"
    assert tc.get("max_attempts", 3) == 3, "a new max_attempts: add its group"
    return "default"


class Children(dict[str, Child]):
    """Services made when first asked for, by make(key)."""

    def __init__(self, make: Callable[[str], Child]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: str) -> Child:
        c = self[key] = self.make(key)
        return c

    def close(self) -> None:
        for c in self.values():
            c.close()


@pytest.fixture(scope="module")
def client_children() -> Iterator[dict[str, Child]]:
    """One Flask service per environment the vectors need."""
    made = Children(lambda key: Child("flask", env=_GROUPS[key]))
    yield made
    made.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tc", CLIENT, ids=[c["name"] for c in CLIENT])
def test_client(tc: dict[str, Any], kind: str, client_children: dict[str, Child], callee_factory: Any) -> None:
    child = client_children[_group(tc)]
    callee = callee_factory(tc["responses"])
    child.spans("CLIENT")  # clear
    status, _, body = child.request(
        "POST",
        "/_client",
        {
            "kind": kind,
            "method": tc["method"],
            "url": callee.url + "/items/1",
            "headers": tc.get("headers"),
            "body": tc.get("body"),
        },
    )
    assert status == 200, body
    want = tc["want"]
    assert json.loads(body)["status"] == want["status"]
    assert callee.requests == want["requests"]
    if "bodies" in want:
        assert callee.bodies == want["bodies"]
    assert [s["attrs"] for s in child.spans("CLIENT")] == want["spans"]


# ---------------------------------------------------------------------------
# server.json


Callees = dict[tuple[int, int], Any]


def _hinted(
    cases: list[Any], make: Callable[[], Any], operation: str, peer_operation: str
) -> tuple[Callees, HintServer]:
    """A callee per call of every case, made first (the hints name them by
    address, and the service reads its hints when it starts), and the hints
    server: a fixture's, closed when it ends."""
    callees = {(i, j): make() for i, tc in enumerate(cases) for j, _ in enumerate(tc.get("calls", []))}
    edges = [
        {
            "operation": operation,
            "peer_service": callees[(i, j)].address,
            "peer_operation": peer_operation,
            "mode": c["mode"],
            "confidence": 0.99,
            "samples": 100,
        }
        for i, tc in enumerate(cases)
        for j, c in enumerate(tc.get("calls", []))
        if c.get("mode")
    ]
    hints = HintServer()
    hints.serve(200, json.dumps({"version": 1, "service": "checkout", "ttl_seconds": 30, "edges": edges}))
    yield callees, hints
    for c in (hints, *callees.values()):
        c.close()


def _script(callees: Callees, i: int, calls: list[Any]) -> list[Any]:
    """Case i's callees, answering its calls' responses from now on."""
    out = []
    for j, c in enumerate(calls):
        callee = callees[(i, j)]
        with callee.lock:
            callee.responses = list(c["responses"])
            callee.requests.clear()
        out.append(callee)
    return out


def _serve(mode: str, hints: HintServer) -> Child:
    """app.py mode, once its hint client has read the hints."""
    env = {"ERROROWNERSHIP_HINTS_ENDPOINT": hints.url}
    if mode == "django":
        env["DJANGO_SETTINGS_MODULE"] = "djsettings"
    c = Child(mode, env=env)
    for _ in range(500):
        if c.ready()["hints"]:
            break
        threading.Event().wait(0.01)
    r = c.ready()
    assert r["hints"], "the service's hint client read no hints"
    assert r["file"].startswith(r["prefix"]), f"the hooks were not imported from {VENV}: {r['file']}"
    return c


def _server_span(child: Child) -> dict[str, Any]:
    """The one server span of the last /checkout, which ends just after
    the answer is sent."""
    got: list[Any] = []
    for _ in range(500):
        got = [s for s in child.spans("SERVER") if s["name"].endswith("checkout")]
        if got:
            break
        threading.Event().wait(0.01)
    assert len(got) == 1
    return got[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def server_callees() -> Iterator[tuple[Callees, HintServer]]:
    yield from _hinted(SERVER, lambda: Callee([]), "GET /checkout", "GET /dep")


@pytest.fixture(scope="module")
def servers(server_callees: Any) -> Iterator[dict[str, Child]]:
    made = Children(lambda key: _serve(key, server_callees[1]))
    yield made
    made.close()


@pytest.mark.parametrize(
    "framework,client",
    [("flask", k) for k in KINDS]
    + [("starlette", "httpx-async"), ("starlette", "urllib"), ("django", "requests"), ("django", "urllib3")],
)
@pytest.mark.parametrize("i", range(len(SERVER)), ids=[c["name"] for c in SERVER])
def test_server(i: int, framework: str, client: str, servers: dict[str, Child], server_callees: Any) -> None:
    """The vectors on Flask, Starlette and Django, the handler calling its callees
    through a client the code-level hooks never wrapped (urllib.request,
    urllib3) or one they did, left as the service wrote it."""
    tc = SERVER[i]
    calls = [
        [c.get("method", "GET"), callee.url + "/dep"]
        for c, callee in zip(tc.get("calls", []), _script(server_callees[0], i, tc.get("calls", [])), strict=True)
    ]
    child = servers[framework]
    child.spans("SERVER")  # clear
    plan = {"client": client, "calls": calls, "status": tc["status"], "set_claim": tc.get("set_claim", [])}
    status, claims, _ = child.request("GET", "/checkout", headers={"X-Plan": json.dumps(plan)})
    assert status == tc["status"]
    want = tc["want"]
    assert claims == ([] if want["header"] is None else [want["header"]])
    assert _server_span(child)["attrs"] == want["span"]


# ---------------------------------------------------------------------------
# grpc.json: app.py grpc, its channels and server made by grpc.insecure_channel
# and grpc.server, which the gRPC instrumentation wraps.


def _grpc(child: Child, method: str, body: bytes, plan: dict[str, Any] | None = None) -> tuple[Any, list[Any], bytes]:
    """Calls the child's gRPC server: the code, the trailers, the answer."""
    import grpc

    md = None if plan is None else (("x-plan", json.dumps(plan)),)
    with grpc.insecure_channel(f"127.0.0.1:{child.ready()['grpc_port']}") as ch:
        try:
            got, call = ch.unary_unary(method).with_call(body, timeout=30, metadata=md)
            return call.code(), list(call.trailing_metadata() or ()), got
        except grpc.RpcError as e:
            return e.code(), list(e.trailing_metadata() or ()), b""  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def grpc_clients() -> Iterator[dict[str, Child]]:
    made = Children(lambda key: Child("grpc", env=_GROUPS[key]))
    yield made
    made.close()


@pytest.mark.parametrize("tc", GRPC_CLIENT, ids=[c["name"] for c in GRPC_CLIENT])
def test_grpc_client(tc: dict[str, Any], grpc_clients: dict[str, Child], grpc_factory: Any) -> None:
    """The attempts are counted at the callee and numbered on the
    instrumentation's spans: grpcio's core keeps grpc-previous-rpc-attempts
    from a Python server, and only the service's own code could look lower."""
    child = grpc_clients[_group(tc)]
    callee = grpc_factory(tc["responses"])
    child.spans("CLIENT")  # clear
    code, _, got = _grpc(child, "/test.Svc/client", callee.address.encode())
    assert code.name == "OK"
    want = tc["want"]
    assert got.decode() == want["code"]
    assert len(callee.requests) == len(want["requests"])
    assert [s["attrs"] for s in child.spans("CLIENT")] == want["spans"]


@pytest.fixture(scope="module")
def grpc_callees() -> Iterator[tuple[Callees, HintServer]]:
    yield from _hinted(GRPC_SERVER, lambda: GrpcCallee([]), "test.Svc/checkout", "test.Svc/Call")


@pytest.fixture(scope="module")
def grpc_server(grpc_callees: Any) -> Iterator[Child]:
    c = _serve("grpc", grpc_callees[1])
    yield c
    c.close()


@pytest.mark.parametrize("i", range(len(GRPC_SERVER)), ids=[c["name"] for c in GRPC_SERVER])
def test_grpc_server(i: int, grpc_server: Child, grpc_callees: Any) -> None:
    tc = GRPC_SERVER[i]
    child = grpc_server
    child.spans("SERVER")  # clear
    callees = _script(grpc_callees[0], i, tc.get("calls", []))
    plan = {"calls": [c.address for c in callees], "code": tc["code"], "set_claim": tc.get("set_claim")}
    code, md, _ = _grpc(child, "/test.Svc/checkout", b"x", plan)
    assert code.name == tc["code"]
    want = tc["want"]
    assert [v for k, v in md if k == "error-claim"] == ([] if want["claim"] is None else [want["claim"]])
    assert [v for k, v in md if k == "grpc-retry-pushback-ms"] == (
        [] if want["pushback"] is None else [want["pushback"]]
    )
    assert _server_span(child)["attrs"] == want["span"]


# ---------------------------------------------------------------------------
# The switch, the environment, the overhead


def test_disabled(callee_factory: Any) -> None:
    """OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=errorownership: the hooks do nothing."""
    child = Child("flask", env={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "errorownership"})
    try:
        callee = callee_factory([{"status": 503, "claim": "claimed"}] * 3)
        plan = {"client": "requests", "calls": [["GET", callee.url + "/dep"]], "status": 502}
        status, claims, _ = child.request("GET", "/checkout", headers={"X-Plan": json.dumps(plan)})
        assert (status, claims, callee.requests) == (502, [], [None])
        spans = child.spans("CLIENT") + child.spans("SERVER")
        assert spans, "the contrib instrumentations still trace"
        assert all(s["attrs"] == {} for s in spans)
    finally:
        child.close()


def test_invalid_environment(callee_factory: Any) -> None:
    """An invalid value: a warning naming the variable and the fix, then the default."""
    child = Child("flask", env={"ERROROWNERSHIP_MAX_ATTEMPTS": "three", "ERROROWNERSHIP_RETRY_RATIO": "-1"})
    try:
        callee = callee_factory([{"status": 503, "claim": "claimed"}] * 3)
        status, _, body = child.request("POST", "/_client", {"kind": "requests", "method": "GET", "url": callee.url})
        assert status == 200, body
        assert callee.requests == [None, "1", "2"]
    finally:
        err = child.close()
    assert "ERROROWNERSHIP_MAX_ATTEMPTS='three' is not a whole number of 1 or more" in err
    assert "ERROROWNERSHIP_RETRY_RATIO='-1' is not a number of 0 or more" in err


# The overhead benchmark: ROUNDS rounds of PER_ROUND requests to each service,
# alternately GET /call (Flask and one requests call) and GET /fail (Flask
# answers 500: a claim is decided), sent in blocks of BLOCK to one service
# then the other.
ROUNDS, PER_ROUND, BLOCK = 16, 160, 10


def overhead() -> tuple[str, list[float]]:
    """The zero-code path against opentelemetry-instrument alone (the same
    app with OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=errorownership), both
    warm child processes serving at once over 127.0.0.1 and calling one
    shared callee. Sequential requests in blocks alternated ABBA, so that
    what the shared machine does meanwhile weighs on both alike; the figure
    is the median of the per-round ratios, with its interquartile range.
    Returns the line to print and its figures."""
    callee = Child("callee", instrument=False)
    url = f"http://127.0.0.1:{callee.port}/dep"
    children = {
        "bare": Child("bench", url, env={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "errorownership"}),
        "hooked": Child("bench", url),
    }
    conns = {k: http.client.HTTPConnection("127.0.0.1", c.port, timeout=30) for k, c in children.items()}

    def run(name: str) -> float:
        """Seconds of BLOCK requests, one after the other on one connection."""
        conn = conns[name]
        t0 = time.perf_counter()
        for i in range(BLOCK):
            conn.request("GET", "/fail" if i % 2 else "/call")
            conn.getresponse().read()
        return time.perf_counter() - t0

    us: dict[str, list[float]] = {"bare": [], "hooked": []}
    try:
        for i in range(-1, ROUNDS):  # round -1 warms up
            took = {"bare": 0.0, "hooked": 0.0}
            for j in range(PER_ROUND // BLOCK):
                for name in ("bare", "hooked") if j % 2 == 0 else ("hooked", "bare"):
                    took[name] += run(name)
            if i >= 0:
                for name, t in took.items():
                    us[name].append(t / PER_ROUND * 1e6)
    finally:
        for conn in conns.values():
            conn.close()
        for c in (*children.values(), callee):
            c.close()
    ratios = [h / b for h, b in zip(us["hooked"], us["bare"], strict=True)]
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    bare, hooked = statistics.median(us["bare"]), statistics.median(us["hooked"])
    line = (
        f"zero-code overhead: hooked/bare {med:.3f} (IQR {q1:.3f}-{q3:.3f}; median of {ROUNDS} rounds "
        f"of {PER_ROUND} requests, ABBA in blocks of {BLOCK}), bare {bare:.0f} µs, hooked {hooked:.0f} µs per request"
    )
    return line, [med, q1, q3, bare, hooked]


def test_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark's line, for hooks-python/README.md: its figures exist,
    never how large they are."""
    line, figures = overhead()
    assert len(figures) == 5 and all(math.isfinite(f) and f > 0 for f in figures), line
    with capsys.disabled():
        sys.stdout.write(f"\n{line}\n")
