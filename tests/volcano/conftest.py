"""The Volcano tests share the rule tests' fixtures."""

from tests.rules.conftest import run  # noqa: F401
