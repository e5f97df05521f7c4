# SPDX-License-Identifier: Apache-2.0

"""The hooks switched on without code: an OpenTelemetry instrumentor that
``opentelemetry-instrument`` loads when this package is installed (its
``opentelemetry_instrumentor`` entry point, named ``errorownership``).

    pip install errorownership-hooks opentelemetry-distro
    opentelemetry-bootstrap -a install
    ERROROWNERSHIP_HINTS_ENDPOINT=http://otel-collector:4320 OTEL_SERVICE_NAME=checkout \\
        opentelemetry-instrument python app.py

Switched off like any instrumentor:
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=errorownership``. Configured by the
environment alone (conformance/vocabulary.yaml, group ``environment``):
ERROROWNERSHIP_HINTS_ENDPOINT (unset: no hints), ERROROWNERSHIP_RETRY_RATIO,
ERROROWNERSHIP_MIN_RETRIES_PER_SECOND, ERROROWNERSHIP_MAX_ATTEMPTS, and the
service's name from OTEL_SERVICE_NAME. An invalid value is logged, naming
the variable and the fix, and its default used.

What it hooks, and where (the contrib instrumentations' own spans stay the
only spans; see _autohooks for why the order the instrumentors are loaded
in does not matter): Flask apps, every app under the ASGI or WSGI
instrumentation's middleware (Starlette, FastAPI), Django's middleware
chain; requests, httpx (sync and async), urllib.request and urllib3;
grpcio servers and channels (unary-unary).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from . import _autohooks
from ._core import DEFAULT_MAX_ATTEMPTS, HintSource
from ._vocabulary import (
    ENV_HINTS_ENDPOINT,
    ENV_MAX_ATTEMPTS,
    ENV_MIN_RETRIES_PER_SECOND,
    ENV_RETRY_RATIO,
    ENV_SERVICE_NAME,
)
from .hints import HintClient
from .ownership import Limits, Mode, default_limits

__all__ = ["EnvConfig", "ErrorOwnershipInstrumentor", "config_from_env"]

_logger = logging.getLogger("errorownership_hooks")


@dataclass(frozen=True)
class EnvConfig:
    """The zero-code hooks' settings, as the environment gives them."""

    hints_endpoint: str
    service: str
    limits: Limits
    max_attempts: int


_T = TypeVar("_T", int, float)


def _number(env: Mapping[str, str], name: str, default: _T, want: str, example: str) -> _T:
    """name's value, or default (and a warning saying what is wanted) where
    it is not a number of the default's type that is finite and at least
    the default's minimum (1 attempt, 0 else)."""
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        v = type(default)(raw)
    except ValueError:
        v = type(default)(-1)
    if not math.isfinite(v) or v < (1 if isinstance(default, int) else 0):
        _logger.warning(
            "errorownership: %s=%r is not %s; using the default %s. Set it to such as %s, or unset it.",
            name,
            raw,
            want,
            default,
            example,
        )
        return default
    return v


def config_from_env(env: Mapping[str, str] | None = None) -> EnvConfig:
    """The settings from env (default os.environ); never raises."""
    e = os.environ if env is None else env
    d = default_limits()
    endpoint = e.get(ENV_HINTS_ENDPOINT, "").strip()
    service = e.get(ENV_SERVICE_NAME, "").strip()
    if endpoint and not endpoint.startswith(("http://", "https://")):
        _logger.warning(
            "errorownership: %s=%r is not an http:// or https:// URL; no hints are read. "
            "Set it to the collector's hints extension, such as http://otel-collector:4320.",
            ENV_HINTS_ENDPOINT,
            endpoint,
        )
        endpoint = ""
    if endpoint and not service:
        _logger.warning(
            "errorownership: %s is set but %s is not; no hints are read. Set %s to the service's name.",
            ENV_HINTS_ENDPOINT,
            ENV_SERVICE_NAME,
            ENV_SERVICE_NAME,
        )
        endpoint = ""
    return EnvConfig(
        hints_endpoint=endpoint,
        service=service,
        limits=Limits(
            _number(e, ENV_RETRY_RATIO, d.ratio, "a number of 0 or more", str(d.ratio)),
            _number(
                e,
                ENV_MIN_RETRIES_PER_SECOND,
                d.min_retries_per_second,
                "a number of 0 or more",
                str(d.min_retries_per_second),
            ),
        ),
        max_attempts=_number(
            e,
            ENV_MAX_ATTEMPTS,
            DEFAULT_MAX_ATTEMPTS,
            "a whole number of 1 or more (attempts per call, the first included)",
            "3 (1 retries nothing)",
        ),
    )


class EnvHints:
    """A HintSource: the edge modes from the hint client (unknown without
    one); the budget limits from the hints where they state them, else from
    the environment."""

    def __init__(self, client: HintClient | None, limits: Limits) -> None:
        self.client = client
        self.limits = limits

    def mode(self, operation: str, peer_service: str, peer_operation: str) -> Mode:
        if self.client is None:
            return Mode.UNKNOWN
        return self.client.mode(operation, peer_service, peer_operation)

    def budget_limits(self) -> Limits:
        if self.client is not None:
            h = self.client.hints()
            if h is not None and h.retry_budget is not None:
                return self.client.budget_limits()
        return self.limits


class ErrorOwnershipInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Claims, unclaims and retries by the rules of error ownership in every
    server and client the contrib instrumentations trace. instrument()
    takes ``hints`` (a HintSource) in place of the environment's hint
    client; called by hand, call it after the contrib instrumentors."""

    _client: HintClient | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        # Each library is hooked only where it is importable.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        cfg = config_from_env()
        hints: HintSource | None = kwargs.get("hints")
        if hints is None:
            client = None
            if cfg.hints_endpoint:
                client = HintClient.start(cfg.hints_endpoint, cfg.service)
                self._client = client
            hints = EnvHints(client, cfg.limits)
            server_hints: HintSource | None = hints if client is not None else None
        else:
            server_hints = hints
        _autohooks.install(_autohooks.Settings(hints=hints, server_hints=server_hints, max_attempts=cfg.max_attempts))

    def _uninstrument(self, **kwargs: Any) -> None:
        _autohooks.uninstall()
        if self._client is not None:
            self._client.stop()
            self._client = None
