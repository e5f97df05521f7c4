# SPDX-License-Identifier: Apache-2.0

"""Error ownership hooks for Python services (docs/design.md).

A server that originates an error claims it (``Error-Claim: claimed``, the
``error-claim`` gRPC trailer); one that passes on a dependency's failure
unclaims it; callers retry only claimed or unlabelled errors, within a
retry budget. The framework hooks live in submodules: ``wsgi``, ``asgi``,
``requests``, ``httpx``, ``grpc``; the hint client in ``hints``.
"""

from ._client import http_operation, idempotent, peer_address, server_fault
from ._core import (
    DEFAULT_BUDGET_WINDOW,
    Backoff,
    Budgets,
    HintSource,
    Ledger,
    ModeFunc,
    Outcome,
    RetryBudget,
    deadline,
    decide_claim,
    decide_retry,
    ledger_from,
    ledger_scope,
)
from .ownership import (
    Claim,
    Limits,
    Mode,
    Reason,
    RetryDecision,
    claim_of_values,
    default_limits,
    parse_claim,
    parse_mode,
    parse_reason,
    parse_retry_decision,
)
from .version import __version__

__all__ = [
    "DEFAULT_BUDGET_WINDOW",
    "Backoff",
    "Budgets",
    "Claim",
    "HintSource",
    "Ledger",
    "Limits",
    "Mode",
    "ModeFunc",
    "Outcome",
    "Reason",
    "RetryBudget",
    "RetryDecision",
    "claim_of_values",
    "deadline",
    "decide_claim",
    "decide_retry",
    "default_limits",
    "http_operation",
    "idempotent",
    "ledger_from",
    "ledger_scope",
    "parse_claim",
    "parse_mode",
    "parse_reason",
    "parse_retry_decision",
    "peer_address",
    "server_fault",
    "__version__",
]
