# SPDX-License-Identifier: Apache-2.0

"""The shared vocabulary of error ownership (docs/design.md §3).

Wire names, span attribute names, the claim, reason, retry-decision and edge
mode spellings, and the retry-budget defaults, as the Go package
``ownership`` defines them.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

# Wire names.
HTTP_CLAIM_HEADER = "Error-Claim"
GRPC_CLAIM_KEY = "error-claim"
GRPC_PUSHBACK_KEY = "grpc-retry-pushback-ms"
HTTP_RETRY_ATTEMPT_HEADER = "Retry-Attempt"
GRPC_PREVIOUS_ATTEMPTS_KEY = "grpc-previous-rpc-attempts"

# Span attribute names.
ATTR_CLAIM = "error_ownership.claim.sent"
ATTR_CLAIM_REASON = "error_ownership.claim.reason"
ATTR_CLAIM_RECEIVED = "error_ownership.claim.received"
ATTR_RETRY_DECISION = "error_ownership.retry.decision"
ATTR_RETRY_ATTEMPT = "error_ownership.retry.attempt"
ATTR_HTTP_RESEND_COUNT = "http.request.resend_count"

# The hints document.
HINTS_VERSION = 1
HINTS_PATH = "/v1/hints"

# Retry-budget defaults, after Finagle's RetryBudget.
DEFAULT_RETRY_RATIO = 0.1
DEFAULT_MIN_RETRIES_PER_SECOND = 10.0
MAX_MIN_RETRIES_PER_SECOND = 1000.0

# A claim value longer than this is missing, whatever it holds.
MAX_CLAIM_VALUE_LEN = 64


class Claim(str, enum.Enum):
    """What a callee says about an error it returns."""

    MISSING = "missing"
    CLAIMED = "claimed"
    UNCLAIMED = "unclaimed"

    def __str__(self) -> str:
        return self.value


class Reason(str, enum.Enum):
    """Why a service sent the claim it sent (``error_ownership.claim.reason``)."""

    NONE = ""
    OWN = "own"
    PROPAGATED = "propagated"
    COINCIDENTAL = "coincidental"
    MISSING_DOWNSTREAM_CLAIM = "missing_downstream_claim"

    def __str__(self) -> str:
        return self.value


class RetryDecision(str, enum.Enum):
    """What a caller did after a failed attempt (``error_ownership.retry.decision``)."""

    NONE = ""
    RETRIED = "retried"
    SUPPRESSED_UNCLAIMED = "suppressed_unclaimed"
    SUPPRESSED_BUDGET = "suppressed_budget"
    NO_POLICY = "no_policy"
    EXHAUSTED = "exhausted"

    def __str__(self) -> str:
        return self.value

    @property
    def suppressed(self) -> bool:
        """Whether the decision is a retry the hooks held back."""
        return self in (RetryDecision.SUPPRESSED_UNCLAIMED, RetryDecision.SUPPRESSED_BUDGET)


class Mode(str, enum.Enum):
    """What the dependency analysis learned about an edge."""

    UNKNOWN = "unknown"
    FAIL_CLOSE = "fail_close"
    FAIL_OPEN = "fail_open"

    def __str__(self) -> str:
        return self.value


_CLAIMS = {"claimed": Claim.CLAIMED, "unclaimed": Claim.UNCLAIMED}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def parse_claim(value: str | bytes | None) -> Claim:
    """Read one claim value: "claimed" or "unclaimed" in any ASCII letter
    case; anything else, oversized values included, is Claim.MISSING."""
    if value is None:
        return Claim.MISSING
    if isinstance(value, bytes):
        if len(value) > 9:
            return Claim.MISSING
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return Claim.MISSING
    if len(value) > 9:
        return Claim.MISSING
    # ASCII-only folding: str.lower would fold non-ASCII look-alikes.
    return _CLAIMS.get(value.translate(_ASCII_LOWER), Claim.MISSING)


def claim_of_values(values: list[str] | list[bytes] | tuple[str, ...]) -> Claim:
    """Read a header's or trailer's values: anything but exactly one clean
    claim (several values, a list, an oversized value) is Claim.MISSING."""
    if len(values) != 1 or len(values[0]) > MAX_CLAIM_VALUE_LEN:
        return Claim.MISSING
    return parse_claim(values[0])


def parse_reason(value: str) -> Reason:
    try:
        return Reason(value)
    except ValueError:
        return Reason.NONE


def parse_retry_decision(value: str) -> RetryDecision:
    try:
        return RetryDecision(value)
    except ValueError:
        return RetryDecision.NONE


def parse_mode(value: object) -> Mode:
    """Read a mode's spelling; anything else is Mode.UNKNOWN, the safe reading."""
    if isinstance(value, str):
        try:
            return Mode(value)
        except ValueError:
            pass
    return Mode.UNKNOWN


@dataclass(frozen=True)
class Limits:
    """A retry budget's limits: ``ratio`` retries per request in [0, 1] and a
    floor of ``min_retries_per_second``."""

    ratio: float = DEFAULT_RETRY_RATIO
    min_retries_per_second: float = DEFAULT_MIN_RETRIES_PER_SECOND

    def validate(self) -> None:
        """Raise ValueError for limits no sane collector means."""
        r, f = self.ratio, self.min_retries_per_second
        if not (0 <= r <= 1) or not (0 <= f <= MAX_MIN_RETRIES_PER_SECOND) or math.isnan(r) or math.isnan(f):
            raise ValueError(
                f"retry budget out of range: ratio {r} (want 0 to 1), "
                f"min_retries_per_second {f} (want 0 to {MAX_MIN_RETRIES_PER_SECOND:g})"
            )


def default_limits() -> Limits:
    return Limits(DEFAULT_RETRY_RATIO, DEFAULT_MIN_RETRIES_PER_SECOND)
