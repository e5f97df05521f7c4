# SPDX-License-Identifier: Apache-2.0

"""httpx clients whose calls the hooks retry by the rules and weigh when
the service fails (README: "httpx"). `python httpx_client.py URL` makes
one call with each, HINTS_URL and OTEL_SERVICE_NAME set."""

import asyncio
import os
import sys

from errorownership_hooks.hints import HintClient

hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])

# region httpx
import httpx

from errorownership_hooks.httpx import AsyncTransport, Transport

client = httpx.Client(transport=Transport(hints=hints))
aclient = httpx.AsyncClient(transport=AsyncTransport(hints=hints))
# endregion


async def call_async(url: str) -> httpx.Response:
    async with aclient:
        return await aclient.get(url)


if __name__ == "__main__":
    with client:
        print(client.get(sys.argv[1]).status_code)
    print(asyncio.run(call_async(sys.argv[1])).status_code)
