# SPDX-License-Identifier: Apache-2.0

"""app.py with the errorownership hooks as a library: the WSGI middleware,
as hooks-python/README.md sets it up for Flask (TestPolyglotChain)."""

import os

from app import SERVICE, app, serve
from errorownership_hooks.hints import HintClient
from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

if __name__ == "__main__":
    hints = HintClient.start(os.environ["HINTS_URL"], SERVICE)
    app.wsgi_app = ErrorOwnershipMiddleware(app.wsgi_app, hints=hints)  # type: ignore[method-assign]
    serve(app)
