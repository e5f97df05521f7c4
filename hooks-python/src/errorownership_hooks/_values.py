# SPDX-License-Identifier: Apache-2.0

"""What reads and writes the vocabulary's values: claims off the wire, the
spellings of reasons, retry decisions and modes, and a retry budget's
limits. The names and values themselves are generated (_vocabulary.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._vocabulary import (
    DEFAULT_MIN_RETRIES_PER_SECOND,
    DEFAULT_RETRY_RATIO,
    MAX_CLAIM_VALUE_LEN,
    MAX_MIN_RETRIES_PER_SECOND,
    Claim,
    Mode,
    Reason,
    RetryDecision,
)

# The longest claim spelling parse_claim accepts: anything longer is missing.
_MAX_CLAIM_LEN = max(len(Claim.CLAIMED.value), len(Claim.UNCLAIMED.value))

_CLAIMS = {c.value: c for c in (Claim.CLAIMED, Claim.UNCLAIMED)}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def parse_claim(value: str | bytes | None) -> Claim:
    """Read one claim value: "claimed" or "unclaimed" in any ASCII letter
    case; anything else, oversized values included, is Claim.MISSING."""
    if value is None:
        return Claim.MISSING
    if isinstance(value, bytes):
        if len(value) > _MAX_CLAIM_LEN:
            return Claim.MISSING
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return Claim.MISSING
    if len(value) > _MAX_CLAIM_LEN:
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
