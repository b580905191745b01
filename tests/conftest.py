"""Shared test helpers: repository paths and running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def run_gpuplan(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed CLI in a fresh process (the real entry point, real exit codes)."""
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e["PYTHONUTF8"] = "1"
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "gpuplan", *args], cwd=cwd or REPO, env=e, input=input,
        capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def gpuplan_cli():
    return run_gpuplan

