# SPDX-License-Identifier: Apache-2.0

"""A Django service in one module, its wsgi.py included (README: "WSGI").
GET /work/<id>?fail=1 answers 500, and ?raise=1 raises (Django answers
500): the hooks claim both. Serve
`wsgi_django:application` with any WSGI server, HINTS_URL and
OTEL_SERVICE_NAME set."""

import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path

from errorownership_hooks.hints import HintClient

# What a project's settings.py and urls.py hold, here in one module.
settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    MIDDLEWARE=[],
)


def work(request: HttpRequest, id: str) -> HttpResponse:
    if request.GET.get("fail"):
        return HttpResponse("failed\n", status=500)
    if request.GET.get("raise"):
        raise RuntimeError("failed")
    return HttpResponse(f"item {id}\n")


urlpatterns = [path("work/<str:id>", work)]

hints = HintClient.start(os.environ["HINTS_URL"], os.environ["OTEL_SERVICE_NAME"])

# region wsgi
from django.core.wsgi import get_wsgi_application

from errorownership_hooks.wsgi import ErrorOwnershipMiddleware

application = ErrorOwnershipMiddleware(get_wsgi_application(), hints=hints)
# endregion
