# SPDX-License-Identifier: Apache-2.0

"""A Starlette service with the ASGI hooks (README: "ASGI"); FastAPI's
add_middleware is Starlette's. GET /work/{id}?fail=1 answers 500, and
?raise=1 raises (Starlette answers 500): the hooks claim both. Run with `python asgi_starlette.py` (uvicorn) and
HINTS_URL, OTEL_SERVICE_NAME set."""

import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from errorownership_hooks.hints import HintClient


async def work(request: Request) -> Response:
    if request.query_params.get("fail"):
        return PlainTextResponse("failed\n", status_code=500)
    if request.query_params.get("raise"):
        raise RuntimeError("failed")
    return PlainTextResponse(f"item {request.path_params['id']}\n")


hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])
app = Starlette(routes=[Route("/work/{id}", work)])

# region asgi
from errorownership_hooks.asgi import ErrorOwnershipMiddleware

app.add_middleware(ErrorOwnershipMiddleware, hints=hints)
# endregion


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
