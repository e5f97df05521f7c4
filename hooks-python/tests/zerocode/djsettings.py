# SPDX-License-Identifier: Apache-2.0

"""The settings of app.py's Django service (``app.py django``), named by
DJANGO_SETTINGS_MODULE as a Django project's are: opentelemetry-instrument's
Django instrumentation reads MIDDLEWARE before the service's code runs."""

SECRET_KEY = "errorownership-zerocode-test"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "__main__"  # app.py's urlpatterns, filled when it serves Django
MIDDLEWARE: list[str] = []
USE_TZ = True
