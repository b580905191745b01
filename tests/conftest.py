"""Shared test helpers: repository paths and running the real CLI."""

from __future__ import annotations

import copy
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


HANG = 120  # seconds: a guard against a hang, never a speed assertion (speed lives in benchmarks/)


def finishes(fn, *, within: float = HANG):
    """``fn()``'s result; fails if it is still running after ``within`` seconds
    (a hostile input must end, not merely end fast)."""
    import threading

    out: list = []
    err: list = []

    def call():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            err.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(within)
    assert not worker.is_alive(), f"still running after {within} s: it hangs"
    if err:
        raise err[0]
    return out[0]


def replaced(data: dict, path: tuple, value: object) -> dict:
    """A deep copy of ``data`` with the value at ``path`` (keys and list indexes) set to ``value``."""
    d = copy.deepcopy(data)
    at = d
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = value
    return d


@pytest.fixture
def gpuplan_cli():
    return run_gpuplan

