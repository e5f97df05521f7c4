# SPDX-License-Identifier: Apache-2.0

"""A grpcio service with the hooks' interceptors beside OpenTelemetry's
(README: "grpcio"): its server answers /stock.Stock/Get (bytes in, bytes
out; b"fail" fails with INTERNAL, which the server hooks claim) and its
channel calls the same method of another stock service at STOCK_ADDR,
which the client hooks retry by the rules. `python grpc_stock.py` serves
on 127.0.0.1:PORT and prints the address; HINTS_URL and
OTEL_SERVICE_NAME set."""

import os

from errorownership_hooks.hints import HintClient

hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])

# region grpc
from concurrent import futures

import grpc
from opentelemetry.instrumentation.grpc import client_interceptor, server_interceptor
from opentelemetry.instrumentation.grpc.grpcext import intercept_channel

from errorownership_hooks.grpc import ClientInterceptor, ServerInterceptor

# The address the channel dials also names the callee for the hints and
# the retry budget.
STOCK = os.environ.get("STOCK_ADDR", "stock:50051")
hooks = ClientInterceptor(STOCK, hints=hints)
inner = grpc.intercept_channel(grpc.insecure_channel(STOCK), hooks.attempt_interceptor)
channel = grpc.intercept_channel(intercept_channel(inner, client_interceptor()), hooks)

server = grpc.server(
    futures.ThreadPoolExecutor(max_workers=4), interceptors=[server_interceptor(), ServerInterceptor(hints=hints)]
)
# endregion


def get(request: bytes, context: grpc.ServicerContext) -> bytes:
    if request == b"fail":
        context.abort(grpc.StatusCode.INTERNAL, "out of stock")
    return b"in stock: " + request


server.add_generic_rpc_handlers(
    (grpc.method_handlers_generic_handler("stock.Stock", {"Get": grpc.unary_unary_rpc_method_handler(get)}),)
)
# No serializers: the requests and responses are bytes.
stock_get = channel.unary_unary("/stock.Stock/Get")


if __name__ == "__main__":
    port = server.add_insecure_port(f"127.0.0.1:{os.environ.get('PORT', '50051')}")
    server.start()
    print(f"127.0.0.1:{port}", flush=True)
    server.wait_for_termination()
