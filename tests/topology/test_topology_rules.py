"""GP601-GP609: every topology rule with a failing and a passing spec.

Each spec under ``specs/`` marks the line a diagnostic must point at with
``# expect: GPnnn:COL [severity]``; the GP6xx diagnostics of the file must be
exactly the marked ones (code, line, column, and severity when given). Pass
files carry no marker and must produce no GP6xx diagnostic at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet
from gpuplan.diagnostics import Severity
from gpuplan.rules import topology

SPECS = Path(__file__).parent / "specs"
MARK = re.compile(r"#\s*expect:\s*(GP6\d\d):(\d+)(?:\s+(error|warning|info))?")


def expected(path: Path) -> set[tuple]:
    out = set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = MARK.search(line)
        if m:
            out.add((m.group(1), n, int(m.group(2)), m.group(3)))
    return out


def found(path: Path, with_severity: set[tuple]) -> set[tuple]:
    checked = check_fleet(path)
    errors = [d for d in checked.diagnostics if d.is_error and not d.code.startswith("GP6")]
    assert not errors, f"{path.name}: the spec itself is broken: {errors}"
    sev = {(c, ln) for c, ln, _col, s in with_severity if s}
    return {
        (d.code, d.line, d.col, d.severity.value if (d.code, d.line) in sev else None)
        # GP655 (info: a pinned AMI's driver is not in the table) belongs to the driver rules
        for d in checked.diagnostics if d.code.startswith("GP6") and d.code != "GP655"
    }


SPEC_FILES = sorted(SPECS.glob("gp6*.yaml"))


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_diagnostics(path: Path) -> None:
    want = expected(path)
    if "-pass" in path.name:
        assert not want
    else:
        assert want, f"{path.name}: a failing spec must mark where its diagnostic goes"
    assert found(path, want) == want


def test_every_code_has_a_failing_and_a_passing_spec() -> None:
    names = [p.name for p in SPEC_FILES]
    for code in topology.CODES:
        n = code.code.lower()
        assert any(x.startswith(n) and "-pass" not in x for x in names), f"no failing spec for {code.code}"
        assert f"{n}-pass.yaml" in names, f"no passing spec for {code.code}"


def test_codes_are_documented() -> None:
    assert [c.code for c in topology.CODES] == [f"GP6{i:02d}" for i in (*range(1, 10), 27, 28, 29)]
    for c in topology.CODES:
        assert c.summary and c.bad and c.good, c.code


@pytest.mark.parametrize("path", [p for p in SPEC_FILES if "-pass" not in p.name], ids=lambda p: p.name)
def test_every_diagnostic_has_a_hint(path: Path) -> None:
    diags = [d for d in check_fleet(path).diagnostics if d.code.startswith("GP6")]
    assert diags and all(d.hint for d in diags)


def test_single_numa_message_names_the_numa_source() -> None:
    d = [d for d in check_fleet(SPECS / "gp602-inventory-fail.yaml").diagnostics if d.code == "GP602"][0]
    assert "2 GPUs per NUMA node (inventory of node pcie-a100-01)" in d.message
    assert "TopologyAffinityError" in d.message
    d = [d for d in check_fleet(SPECS / "gp602-fail.yaml").diagnostics if d.code == "GP602"][0]
    assert "instance type p5.48xlarge" in d.message and d.severity is Severity.ERROR


def test_restricted_is_not_a_rejection() -> None:
    """restricted admits the narrowest multi-NUMA mask: GP603 is informational, never an error."""
    diags = check_fleet(SPECS / "gp603-fail.yaml").diagnostics
    assert [d.code for d in diags if d.code.startswith("GP6") and d.code != "GP655"] == ["GP603"]
    assert all(d.severity is Severity.INFO for d in diags if d.code == "GP603")
    assert not any(d.is_error for d in diags)


def test_inventory_beats_declared_interconnect() -> None:
    d = [d for d in check_fleet(SPECS / "gp604-inventory-fail.yaml").diagnostics if d.code == "GP604"][0]
    assert "inventory of node pcie-a100-01" in d.message


def test_model_layout_without_inventory(tmp_path) -> None:
    """Static 8-GPU SXM pool without inventory: the HGX 4+4 layout is assumed."""
    text = (SPECS / "gp604-inventory-pass.yaml").read_text()
    text = text.replace("  inventory: [inventory/hgx-h100-01.yaml]\n", "")
    text = text.replace("requiresNVLink: true}", "maxGPUsPerPod: 8}")
    text = text.replace("      nodes: [hgx-h100-01]\n",
                        "      nodes: [hgx-h100-01]\n      topology: {policy: single-numa-node, reservedSystemCPUs: \"0\"}\n")
    p = tmp_path / "model-layout.yaml"
    p.write_text(text)
    diags = [d for d in check_fleet(p).diagnostics if d.code == "GP602"]
    assert len(diags) == 1 and "8-GPU HGX board" in diags[0].message
