# SPDX-License-Identifier: Apache-2.0

"""Per-request overhead of the hooks against the bare path, in process (no
network, no OpenTelemetry SDK: the API's no-op tracer), printed as µs/op.
It measures the installed package, so it lives outside it: no user needs it.

    .venv/bin/python bench/bench.py [iterations]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from errorownership_hooks.wsgi import ErrorOwnershipMiddleware


def _time(f: Callable[[], Any], n: int) -> float:
    for _ in range(min(n, 1000)):
        f()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 20000
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/checkout"}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
        return lambda b: None

    def ok_app(env: dict[str, Any], sr: Any) -> list[bytes]:
        sr("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    def fail_app(env: dict[str, Any], sr: Any) -> list[bytes]:
        sr("500 Internal Server Error", [("Content-Type", "text/plain")])
        return [b"boom"]

    def serve(app: Any) -> Callable[[], list[bytes]]:
        return lambda: list(app(environ, start_response))

    rows: list[tuple[str, float, float]] = []
    for name, app in (("wsgi middleware, 200", ok_app), ("wsgi middleware, 500 (claim decided)", fail_app)):
        rows.append((name, _time(serve(app), n), _time(serve(ErrorOwnershipMiddleware(app)), n)))

    try:
        import httpx

        from errorownership_hooks.httpx import Transport

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=b"ok")

        bare_c = httpx.Client(transport=httpx.MockTransport(handler))
        hooked_c = httpx.Client(transport=Transport(httpx.MockTransport(handler)))
        url = "http://catalog:8080/items/1"
        rows.append(
            ("httpx client, 200", _time(lambda: bare_c.get(url), n // 10), _time(lambda: hooked_c.get(url), n // 10))
        )

        def hooked_inner(env: dict[str, Any], sr: Any) -> list[bytes]:
            hooked_c.get(url)
            return ok_app(env, sr)

        def bare_app(env: dict[str, Any], sr: Any) -> list[bytes]:
            bare_c.get(url)
            return ok_app(env, sr)

        hooked_app = ErrorOwnershipMiddleware(hooked_inner)
        rows.append(
            (
                "wsgi middleware + one httpx call",
                _time(lambda: list(bare_app(environ, start_response)), n // 10),
                _time(lambda: list(hooked_app(environ, start_response)), n // 10),
            )
        )
    except ImportError:
        pass

    print(f"{'path':<40} {'bare µs/op':>11} {'hooked µs/op':>13} {'overhead µs/op':>15}")
    for name, bare, hooked_t in rows:
        print(f"{name:<40} {bare:>11.2f} {hooked_t:>13.2f} {hooked_t - bare:>15.2f}")


if __name__ == "__main__":
    main(sys.argv)
