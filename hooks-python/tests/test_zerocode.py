# SPDX-License-Identifier: Apache-2.0

"""The zero-code path: the built wheel in .venv-zerocode (Makefile:
hooks-deps) with the contrib instrumentations, and tests/zerocode/app.py,
a service with no error-ownership code, run in a child process under
``opentelemetry-instrument``. The callees and the hints server run here.

client.json through requests, httpx (sync and async), urllib.request and
urllib3; server.json on Flask (its dependency called through each client,
urllib.request among them), Starlette and Django; the disable switch; the overhead
against opentelemetry-instrument alone."""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Callee, load
from hintserver import HintServer

HERE = Path(__file__).resolve().parent
VENV = Path(os.environ.get("ZEROCODE_VENV") or HERE.parent / ".venv-zerocode")
APP = HERE / "zerocode" / "app.py"
CLIENT = load("client.json")["cases"]
SERVER = load("server.json")["cases"]
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


@pytest.fixture(scope="module")
def client_children() -> Iterator[dict[str, Child]]:
    """One Flask service per environment the vectors need, made when first asked for."""
    made: dict[str, Child] = {}

    class Lazy(dict[str, Child]):
        def __missing__(self, key: str) -> Child:
            made[key] = Child("flask", env=_GROUPS[key])
            self[key] = made[key]
            return made[key]

    yield Lazy()
    for c in made.values():
        c.close()


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


@pytest.fixture(scope="module")
def server_callees() -> Iterator[tuple[dict[tuple[int, int], Callee], HintServer]]:
    """A callee per call of every case, made first: the hints name them by
    address, and the service reads its hints when it starts."""
    callees = {(i, j): Callee([]) for i, tc in enumerate(SERVER) for j, _ in enumerate(tc.get("calls", []))}
    edges = [
        {
            "operation": "GET /checkout",
            "peer_service": callees[(i, j)].address,
            "peer_operation": "GET /dep",
            "mode": c["mode"],
            "confidence": 0.99,
            "samples": 100,
        }
        for i, tc in enumerate(SERVER)
        for j, c in enumerate(tc.get("calls", []))
        if c.get("mode")
    ]
    hints = HintServer()
    hints.serve(200, json.dumps({"version": 1, "service": "checkout", "ttl_seconds": 30, "edges": edges}))
    yield callees, hints
    hints.close()
    for c in callees.values():
        c.close()


@pytest.fixture(scope="module")
def servers(server_callees: Any) -> Iterator[dict[str, Child]]:
    _, hints = server_callees
    made: dict[str, Child] = {}

    class Lazy(dict[str, Child]):
        def __missing__(self, key: str) -> Child:
            env = {"ERROROWNERSHIP_HINTS_ENDPOINT": hints.url}
            if key == "django":
                env["DJANGO_SETTINGS_MODULE"] = "djsettings"
            c = Child(key, env=env)
            made[key] = c
            self[key] = c
            for _ in range(500):
                if c.ready()["hints"]:
                    break
                threading.Event().wait(0.01)
            r = c.ready()
            assert r["hints"], "the service's hint client read no hints"
            assert r["file"].startswith(r["prefix"]), f"the hooks were not imported from {VENV}: {r['file']}"
            return c

    yield Lazy()
    for c in made.values():
        c.close()


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
    callees, _ = server_callees
    calls = []
    for j, c in enumerate(tc.get("calls", [])):
        callee = callees[(i, j)]
        with callee.lock:
            callee.responses = list(c["responses"])
            callee.requests.clear()
        calls.append([c.get("method", "GET"), callee.url + "/dep"])
    child = servers[framework]
    child.spans("SERVER")  # clear
    plan = {"client": client, "calls": calls, "status": tc["status"], "set_claim": tc.get("set_claim", [])}
    status, claims, _ = child.request("GET", "/checkout", headers={"X-Plan": json.dumps(plan)})
    assert status == tc["status"]
    want = tc["want"]
    assert claims == ([] if want["header"] is None else [want["header"]])
    for _ in range(500):  # the ASGI server span ends just after the body is sent
        got = [s for s in child.spans("SERVER") if s["name"].endswith("checkout")]
        if got:
            break
        threading.Event().wait(0.01)
    assert len(got) == 1
    assert got[0]["attrs"] == want["span"]


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
