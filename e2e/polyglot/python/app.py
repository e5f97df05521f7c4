# SPDX-License-Identifier: Apache-2.0

"""The Python services of the polyglot chain (stock, reviews): Flask, run under
opentelemetry-instrument, with the errorownership WSGI middleware."""

import json
import os
import sys
import threading

from errorownership_hooks.hints import HintClient
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware
from flask import Flask, Response, request

SERVICE = os.environ["OTEL_SERVICE_NAME"]
ROUTE = os.environ.get("ROUTE", SERVICE)

app = Flask(__name__)
# The hooks, as hooks-python/README.md sets them up for Flask.
hints = HintClient.start(os.environ["HINTS_URL"], SERVICE)
app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)  # type: ignore[method-assign]
lock = threading.Lock()
counters = {"served": 0, "own": 0, "propagated": 0, "coincidental": 0}
rate = [float(os.environ.get("RATE", "0"))]


def fails(item: str, attempt: str) -> bool:
    h = 0x811C9DC5
    for b in f"{item}/{SERVICE}/{attempt or '0'}".encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h / 2**32 < rate[0]


@app.get(f"/{ROUTE}/<int:item>")
def work(item: int) -> Response:
    failed = fails(str(item), request.headers.get("Retry-Attempt", ""))
    with lock:
        counters["served"] += 1
        if failed:
            counters["own"] += 1
    if failed:
        return Response("out of stock\n", status=503)
    return Response("ok\n")


@app.post("/admin/rate")
def set_rate() -> Response:
    rate[0] = float(request.args["value"])
    return Response("ok\n")


@app.get("/admin/counters")
def get_counters() -> Response:
    with lock:
        return Response(json.dumps(counters), mimetype="application/json")


if __name__ == "__main__":
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(f"127.0.0.1:{server.port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()
