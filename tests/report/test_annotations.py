"""Disruptions and hand steps as diagnostics (gpuplan.report.annotations), rendered by the
GitHub reporter: anchored where the spec says so, and no text can forge a command."""

from __future__ import annotations

from gpuplan.report.annotations import change_diagnostics
from gpuplan.report.disruption import Disruption
from gpuplan.reporters.formats import render
from tests.rules.helpers import BASE, position


def test_kinds_map_to_codes_and_levels(tmp_path):
    from gpuplan.compiler import check_fleet

    (tmp_path / "fleet.yaml").write_text(BASE)
    rf = check_fleet(tmp_path / "fleet.yaml", display="fleet.yaml").resolved
    ds = [Disruption("hand-step", "delivery", "apply delivery/bootstrap.yaml by hand"),
          Disruption("drain", "node n3 (pool infer)", "nvidia.com/mig.config a -> b: drained"),
          Disruption("reconfigure", "node n4 (pool dev)", "nvidia.com/device-plugin.config a -> b")]
    hand, drain, reconf = change_diagnostics(rf, ds)
    assert (hand.code, hand.severity.value, hand.line) == ("GP814", "warning", None)
    assert (drain.code, drain.severity.value) == ("GP813", "warning")
    assert (drain.line, drain.col) == position(BASE, "{1g.10gb: 7}")
    assert (reconf.code, reconf.severity.value) == ("GP813", "info")
    out = render("github", [hand, drain, reconf]).splitlines()
    assert out[0].startswith("::warning file=fleet.yaml,title=gpuplan GP814::hand-step: delivery: ")
    assert out[2].startswith("::notice file=fleet.yaml,line=")


def test_hostile_text_cannot_start_a_command(tmp_path):
    from gpuplan.compiler import check_fleet

    (tmp_path / "fleet.yaml").write_text(BASE)
    # a file name and texts from the two trees that try to end the command and start another
    rf = check_fleet(tmp_path / "fleet.yaml", display="a,line=1::b\n::error::forged.yaml").resolved
    ds = [Disruption("destructive", "Namespace x\n::error file=f,line=1::forged", "gone\r\n::warning::forged ##[error]x"),
          Disruption("drain", "node n3 (pool infer)", "50%0A::error::forged")]
    out = render("github", change_diagnostics(rf, ds))
    lines = out.splitlines()
    assert len(lines) == 2  # one line per disruption, whatever they hold
    assert all(ln.startswith("::warning file=a%2Cline=1%3A%3Ab\\n%3A%3Aerror%3A%3Aforged.yaml,") for ln in lines)
    assert "##[" not in out and "%0A::error" not in out.replace("%250A", "")
    assert lines[1].endswith("50%250A::error::forged")  # a literal %0A is not a line break
