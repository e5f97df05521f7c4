# SPDX-License-Identifier: Apache-2.0

"""A Flask service that calls two others with requests, under
opentelemetry-instrument at its default settings, with the error-ownership
hooks set up as hooks-python/README.md says (the README's snippets are
copied from the regions below). e2e/newcomer_test.go describes
what it answers.

    OTEL_SERVICE_NAME=front HINTS_URL=http://127.0.0.1:4320 \\
        opentelemetry-instrument python app.py
"""

import os
import sys

import requests
from flask import Flask, Response, request

# region setup
import signal

from errorownership_hooks.hints import HintClient
from errorownership_hooks.requests import Session
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

SERVICE = os.environ["OTEL_SERVICE_NAME"]

# The hints the collector learned for this service; a daemon thread polls
# them (its polls are never spans). Until the first answer every edge is
# unknown, treated as fail-close, and budgets keep their defaults.
hints = HintClient.start(os.environ["HINTS_URL"], SERVICE)

app = Flask(__name__)
# Under opentelemetry-instrument app.wsgi_app is already the instrumented
# one: the hooks go around it.
app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)  # type: ignore[method-assign]

# Calls through this session are the ones the hooks retry and weigh when
# the service fails.
session = Session(hints=hints)


# Python's default SIGTERM ends the process without running atexit, where
# opentelemetry-instrument shuts the SDK down and exports the last spans.
def _exit(signum: int, frame: object) -> None:
    sys.exit(0)


signal.signal(signal.SIGTERM, _exit)
# endregion

DEPENDENCIES = [os.environ[k] for k in ("MUST_URL", "MAY_URL") if os.environ.get(k)]


def call(base: str, item: str, fail: str) -> bool:
    try:
        # region call
        r = session.get(f"{base}/work/{item}", params={"fail": fail}, timeout=10)
        # endregion
    except requests.RequestException:
        return False
    return 200 <= r.status_code < 300


@app.get("/work/<item>")
def work(item: str) -> Response:
    fail = request.args.get("fail", "")
    results = [call(base, item, fail) for base in DEPENDENCIES]
    if SERVICE in fail.split(","):
        return Response("failed on its own\n", status=500 if DEPENDENCIES else 503)
    if results and not results[0]:
        return Response("its must dependency failed\n", status=502)
    return Response("ok\n")


if __name__ == "__main__":
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(f"127.0.0.1:{server.port}", flush=True)
    server.serve_forever()
