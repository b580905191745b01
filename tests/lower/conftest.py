"""Fixtures for the lowering tests."""

from __future__ import annotations

import textwrap

import pytest
from tests.outputkit import EXAMPLES, compile_ok


@pytest.fixture(scope="session")
def examples():
    return {name: compile_ok(path) for name, path in EXAMPLES.items()}


@pytest.fixture
def build(tmp_path):
    """Compile a spec given as YAML text (dedented); returns the Compiled result."""

    def _build(text: str, name: str = "fleet.yaml"):
        p = tmp_path / name
        p.write_text(textwrap.dedent(text), encoding="utf-8")
        return compile_ok(p)

    return _build
