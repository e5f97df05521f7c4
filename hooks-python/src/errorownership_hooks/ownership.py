# SPDX-License-Identifier: Apache-2.0

"""The shared vocabulary of error ownership (docs/design.md §3).

Wire names, span attribute names, the claim, reason, retry-decision and edge
mode spellings, and the retry-budget defaults, as the Go package
``ownership`` defines them. The names and values are generated from
conformance/vocabulary.yaml into ``_vocabulary``; what reads them is in
``_values``. This module publishes both.
"""

from __future__ import annotations

from ._values import (
    Limits,
    claim_of_values,
    default_limits,
    parse_claim,
    parse_mode,
    parse_reason,
    parse_retry_decision,
)
from ._vocabulary import (
    ATTR_CLAIM,
    ATTR_CLAIM_REASON,
    ATTR_CLAIM_RECEIVED,
    ATTR_HTTP_RESEND_COUNT,
    ATTR_RETRY_ATTEMPT,
    ATTR_RETRY_DECISION,
    DEFAULT_MIN_RETRIES_PER_SECOND,
    DEFAULT_RETRY_RATIO,
    GRPC_CLAIM_KEY,
    GRPC_PREVIOUS_ATTEMPTS_KEY,
    GRPC_PUSHBACK_KEY,
    HINTS_PATH,
    HINTS_VERSION,
    HTTP_CLAIM_HEADER,
    HTTP_RETRY_ATTEMPT_HEADER,
    MAX_CLAIM_VALUE_LEN,
    MAX_MIN_RETRIES_PER_SECOND,
    Claim,
    Mode,
    Reason,
    RetryDecision,
)

__all__ = [
    "ATTR_CLAIM",
    "ATTR_CLAIM_REASON",
    "ATTR_CLAIM_RECEIVED",
    "ATTR_HTTP_RESEND_COUNT",
    "ATTR_RETRY_ATTEMPT",
    "ATTR_RETRY_DECISION",
    "DEFAULT_MIN_RETRIES_PER_SECOND",
    "DEFAULT_RETRY_RATIO",
    "GRPC_CLAIM_KEY",
    "GRPC_PREVIOUS_ATTEMPTS_KEY",
    "GRPC_PUSHBACK_KEY",
    "HINTS_PATH",
    "HINTS_VERSION",
    "HTTP_CLAIM_HEADER",
    "HTTP_RETRY_ATTEMPT_HEADER",
    "MAX_CLAIM_VALUE_LEN",
    "MAX_MIN_RETRIES_PER_SECOND",
    "Claim",
    "Limits",
    "Mode",
    "Reason",
    "RetryDecision",
    "claim_of_values",
    "default_limits",
    "parse_claim",
    "parse_mode",
    "parse_reason",
    "parse_retry_decision",
]
