# SPDX-License-Identifier: Apache-2.0

"""How a scripted gRPC handler answers: shared by the in-process tests'
callees (conftest, test_conformance_grpc) and the zero-code service
(zerocode/app.py), which imports it from its own directory."""

from __future__ import annotations

from typing import Any


def answer(context: Any, code: str, claim: str | None, details: str) -> bytes:
    """Answers with the status code named code, the error-claim trailer set
    to claim first where it is given."""
    import grpc

    if claim is not None:
        context.set_trailing_metadata((("error-claim", claim),))
    c = grpc.StatusCode[code]
    if c is not grpc.StatusCode.OK:
        context.abort(c, details)
    return b"ok"
