"""GP610-GP620: every Karpenter rule with a failing and a passing spec
(markers as in tests/topology: ``# expect: GPnnn:COL``), and the messages
that name what an instance type really has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet
from gpuplan.rules import karpenter

SPECS = Path(__file__).parent / "specs"
MARK = re.compile(r"#\s*expect:\s*(GP6\d\d):(\d+)")
SPEC_FILES = sorted(SPECS.glob("gp6*.yaml"))


def expected(path: Path) -> set[tuple]:
    out = set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = MARK.search(line)
        if m:
            out.add((m.group(1), n, int(m.group(2))))
    return out


def gp6(path: Path):
    checked = check_fleet(path)
    broken = [d for d in checked.diagnostics if d.is_error and not d.code.startswith("GP6")]
    assert not broken, f"{path.name}: the spec itself is broken: {broken}"
    # GP655 (info: the AMI's driver is not in the table) is the driver rules', tested in test_ami_drivers
    return [d for d in checked.diagnostics if d.code.startswith("GP6") and d.code != "GP655"]


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_diagnostics(path: Path) -> None:
    want = expected(path)
    assert bool(want) == ("-pass" not in path.name)
    assert {(d.code, d.line, d.col) for d in gp6(path)} == want


def test_every_code_has_a_failing_and_a_passing_spec() -> None:
    names = [p.name for p in SPEC_FILES]
    for code in karpenter.CODES:
        n = code.code.lower()
        assert any(x.startswith(n) and "-pass" not in x for x in names), f"no failing spec for {code.code}"
        assert f"{n}-pass.yaml" in names, f"no passing spec for {code.code}"
    for c in karpenter.CODES:
        assert c.summary and c.bad and c.good and c.code.startswith("GP6"), c.code


def one(name: str, code: str):
    ds = [d for d in gp6(SPECS / name) if d.code == code]
    assert len(ds) == 1, ds
    assert ds[0].hint
    return ds[0]


def test_wrong_model_names_what_the_instance_has() -> None:
    d = one("gp611-fail.yaml", "GP611")
    assert d.is_error
    assert "g4dn.4xlarge has 1× T4" in d.message
    assert "A100-SXM4-80GB" in d.message
    assert "p4de.24xlarge" in d.hint  # the instance type that has the GPU


def test_p4d_is_a100_40gb_not_80gb() -> None:
    d = one("gp611-p4d-fail.yaml", "GP611")
    assert "p4d.24xlarge has 8× A100 40GB (A100-SXM4-40GB)" in d.message
    assert "p4de.24xlarge" in d.hint


def test_wrong_count() -> None:
    d = one("gp612-fail.yaml", "GP612")
    assert "gpusPerNode 4" in d.message and "8× H100 80GB" in d.message
    d = one("gp612-mixed-fail.yaml", "GP612")
    assert "g6e.48xlarge has 8 GPUs but g6e.12xlarge has 4" in d.message


def test_unknown_type_did_you_mean() -> None:
    d = one("gp610-fail.yaml", "GP610")
    assert "'p4d.24xlarg'" in d.message
    assert d.hint.startswith("did you mean p4d.24xlarge")


def test_missing_aws_stops_the_build(tmp_path) -> None:
    from gpuplan.compiler import compile_fleet

    r = compile_fleet(SPECS / "gp614-fail.yaml")
    assert any(d.code == "GP614" and d.is_error for d in r.diagnostics)
    assert not r.files
