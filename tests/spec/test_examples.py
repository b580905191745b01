"""Positive and negative spec examples, discovered from the folders beside this file.

Each ``invalid/NAME.yaml`` is paired with ``invalid/NAME.expected``: one
``CODE LINE:COL`` per line, the exact set of diagnostics it must produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet

HERE = Path(__file__).parent
VALID = sorted((HERE / "valid").glob("*.yaml"))
INVALID = sorted((HERE / "invalid").glob("*.yaml"))
EXAMPLES = sorted((HERE.parent.parent / "examples").glob("*.yaml"))


def test_folders_are_not_empty():
    assert len(VALID) >= 3 and len(INVALID) >= 20 and EXAMPLES


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: p.name)
def test_valid_specs_have_no_errors(path: Path):
    checked = check_fleet(path)
    errors = [d for d in checked.diagnostics if d.is_error]
    assert checked.resolved is not None
    assert errors == []


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_specs_produce_exactly_their_diagnostics(path: Path):
    expected = sorted(line.strip() for line in path.with_suffix(".expected").read_text().splitlines() if line.strip())
    checked = check_fleet(path)
    codes = {e.split()[0] for e in expected}
    got = sorted(f"{d.code} {d.line}:{d.col}" for d in checked.diagnostics if d.is_error or d.code in codes)
    assert got == expected
    for d in checked.diagnostics:
        assert d.file == str(path)
        assert d.message and "{" not in d.message.replace("{'", "").replace("{3", "")  # no raw templates


def test_every_invalid_example_has_an_expectation():
    for path in INVALID:
        assert path.with_suffix(".expected").is_file(), path
