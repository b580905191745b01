"""The conformance tests share the lowering tests' fixtures."""

from tests.lower.conftest import build, examples  # noqa: F401
