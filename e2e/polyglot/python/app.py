# SPDX-License-Identifier: Apache-2.0

"""The Python services of the polyglot chain (stock, reviews): Flask, run under
opentelemetry-instrument. Alone (``python app.py``) it has no hooks code: the
zero-code chain's errorownership instrumentor, installed from the wheel, does
their work; ``python library.py`` adds the hooks as a library."""

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request

SERVICE = os.environ["OTEL_SERVICE_NAME"]
ROUTE = os.environ.get("ROUTE", SERVICE)

app = Flask(__name__)
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


def serve(wsgi_app: Callable[..., Any]) -> None:
    """Serve on a port of its own choosing, printed first (../README.md)."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, wsgi_app, threaded=True)
    print(f"127.0.0.1:{server.port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    serve(app)
