# SPDX-License-Identifier: Apache-2.0

"""A Flask service that sets OpenTelemetry up in code instead of running
under opentelemetry-instrument (README: "Programmatic set-up"). Run with
`python programmatic.py` and the OTEL_* variables of the exporter."""

import os
import signal
import sys

from flask import Flask

# region programmatic
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from errorownership_hooks.hints import HintClient
from errorownership_hooks.requests import Session
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

# The provider shuts down at exit (atexit), exporting the last spans.
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
# Before the first Session is made: each attempt is its own CLIENT span.
RequestsInstrumentor().instrument()

app = Flask(__name__)
FlaskInstrumentor().instrument_app(app)  # first: the hooks go around it
hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])
app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)  # type: ignore[method-assign]
session = Session(hints=hints)


def _exit(signum: int, frame: object) -> None:
    sys.exit(0)  # SystemExit runs atexit; Python's default SIGTERM does not


signal.signal(signal.SIGTERM, _exit)
# endregion


@app.get("/")
def index() -> str:
    return "ok\n"


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8080")))
