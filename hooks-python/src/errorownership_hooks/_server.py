# SPDX-License-Identifier: Apache-2.0

"""What the server hooks share: deciding the claim of a failed request."""

from __future__ import annotations

from opentelemetry import trace

from ._core import HintSource, Ledger, ModeFunc
from .ownership import ATTR_CLAIM, ATTR_CLAIM_REASON, Claim, Mode, Reason


def modes_for(hints: HintSource | None, operation: str) -> ModeFunc | None:
    if hints is None:
        return None
    src = hints

    def modes(peer: str, peer_op: str) -> Mode:
        try:
            return src.mode(operation, peer, peer_op)
        except Exception:  # a hint source never fails a request
            return Mode.UNKNOWN

    return modes


def decide(ledger: Ledger, hints: HintSource | None, operation: str, timed_out: bool, span: trace.Span) -> Claim:
    """The claim for a failed request, with its attributes on span."""
    claim, reason = ledger.decide(modes_for(hints, operation), timed_out)
    if span.is_recording():
        span.set_attributes({ATTR_CLAIM: claim.value, ATTR_CLAIM_REASON: reason.value})
    return claim


def own_claim(claim: Claim, span: trace.Span) -> None:
    if span.is_recording():
        span.set_attribute(ATTR_CLAIM, claim.value)


__all__ = ["Reason", "decide", "modes_for", "own_claim"]
