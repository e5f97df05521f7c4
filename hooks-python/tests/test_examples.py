# SPDX-License-Identifier: Apache-2.0

"""The README's snippets come from examples/ (and from the newcomer
service, which internal/e2e/newcomer_python_test.go runs): each compiles.
Flask, which they use, is not among the test dependencies, so they are
compiled here, not run."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_compiles(path: Path) -> None:
    compile(path.read_text(encoding="utf-8"), str(path), "exec")
