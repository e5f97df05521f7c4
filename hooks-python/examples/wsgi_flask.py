# SPDX-License-Identifier: Apache-2.0

"""A Flask service with the WSGI hooks (README: "WSGI"). GET
/work/<id>?fail=1 answers 500, and ?raise=1 raises (Flask answers
500): the hooks claim both. Run with
`python wsgi_flask.py` and HINTS_URL, OTEL_SERVICE_NAME set."""

import os

from flask import Flask, request

from errorownership_hooks.hints import HintClient

hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])
app = Flask(__name__)


@app.get("/work/<id>")
def work(id: str) -> tuple[str, int]:
    if request.args.get("fail"):
        return "failed\n", 500
    if request.args.get("raise"):
        raise RuntimeError("failed")
    return f"item {id}\n", 200


# region wsgi
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)  # type: ignore[method-assign]
# endregion


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8080")))
