# SPDX-License-Identifier: Apache-2.0

"""Which attributes the hooks set on a span, and how often: shared by the
in-process tests (conftest) and the zero-code service (zerocode/app.py),
which imports it from its own directory."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import Span as SdkSpan

_HOOKS_PACKAGE = "errorownership_hooks"


class AttributeSpy:
    """Counts, per span and key, how often the span's attribute was set (a
    value present at the span's start counts as one) and which keys the
    hooks set themselves: the vectors say which attributes the hooks set,
    exactly, and that each is set once. The Python SDK keeps an overwrite
    silently (no dropped count), so only the calls show one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sets: dict[int, Counter[str]] = {}
        self.by_hooks: dict[int, set[str]] = {}
        # Older SDKs (1.28) implement set_attribute with set_attributes: one
        # call, not two.
        self.inside = threading.local()

    def clear(self) -> None:
        with self.lock:
            self.sets.clear()
            self.by_hooks.clear()

    def record(self, span: SdkSpan, keys: list[str]) -> None:
        # The caller is the first frame outside the SDK and this spy.
        f = sys._getframe(2)
        while f is not None and f.f_globals.get("__name__", "").startswith(("opentelemetry.sdk.", __name__)):
            f = f.f_back  # type: ignore[assignment]
        caller = f.f_globals.get("__name__", "") if f is not None else ""
        from_hooks = caller == _HOOKS_PACKAGE or caller.startswith(_HOOKS_PACKAGE + ".")
        sid = span.get_span_context().span_id
        present = span.attributes or {}
        with self.lock:
            counts = self.sets.setdefault(sid, Counter())
            for k in keys:
                if counts[k] == 0 and k in present:
                    counts[k] += 1
                counts[k] += 1
                if from_hooks:
                    self.by_hooks.setdefault(sid, set()).add(k)

    def install(self) -> None:
        spy = self
        set_attribute, set_attributes = SdkSpan.set_attribute, SdkSpan.set_attributes

        def spied_set_attribute(self: SdkSpan, key: str, value: Any) -> None:
            if self.is_recording():
                spy.record(self, [key])
            spy.inside.active = True
            try:
                set_attribute(self, key, value)
            finally:
                spy.inside.active = False

        def spied_set_attributes(self: SdkSpan, attributes: Mapping[str, Any]) -> None:
            if self.is_recording() and not getattr(spy.inside, "active", False):
                spy.record(self, list(attributes))
            set_attributes(self, attributes)

        SdkSpan.set_attribute = spied_set_attribute  # type: ignore[method-assign]
        SdkSpan.set_attributes = spied_set_attributes  # type: ignore[method-assign]

    def hooks_set(self, span: Any) -> dict[str, Any]:
        """The attributes the hooks set on span, with their values: all of
        them, so that one the vectors do not name fails the comparison.
        Fails where one of them was set more than once or the span dropped
        attributes."""
        sid = span.context.span_id
        with self.lock:
            keys = set(self.by_hooks.get(sid, ()))
            counts = Counter(self.sets.get(sid, Counter()))
        twice = {k: counts[k] for k in keys if counts[k] != 1}
        assert not twice, f"span {span.name!r}: attributes set more than once: {twice}"
        assert span.dropped_attributes == 0, f"span {span.name!r}: {span.dropped_attributes} dropped attributes"
        attrs = span.attributes or {}
        return {k: attrs[k] for k in sorted(keys)}
