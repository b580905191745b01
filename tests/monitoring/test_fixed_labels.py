"""No emitted alert selects a node label the tree fixes (GP985), over every example with
monitoring switched on, and the check itself on a hand-made selector."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet
from gpuplan.objchecks.monitoring import fixed_label_selections

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = sorted((REPO / "examples").glob("*.yaml"))


def with_monitoring(src: Path, tmp_path: Path) -> Path:
    """The example with ``spec.monitoring`` (its own, or a stock one), under ``tmp_path``
    (the examples read no file beside them)."""
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["spec"].setdefault("monitoring", {"release": "kube-prometheus-stack"})
    out = tmp_path / src.name
    out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return out


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_no_alert_selects_a_fixed_node_label(example, tmp_path):
    checked = check_fleet(with_monitoring(example, tmp_path))
    assert checked.resolved is not None, checked.diagnostics
    errors = [d for d in checked.diagnostics if d.is_error]
    assert not errors, errors


def test_the_check_sees_a_fixed_label():
    expr = ('kube_node_labels{label_gpuplan_dev_pool="p", label_nvidia_com_mig_config_state="failed"}'
            ' and on(node) kube_node_labels{label_gpuplan_dev_pool="q"}')
    presets = {"p": {"gpuplan.dev/pool": "p", "nvidia.com/mig.config.state": "success"},
               "q": {"gpuplan.dev/pool": "q"}}
    assert fixed_label_selections(expr, presets) == [
        ("p", "nvidia.com/mig.config.state", "=", "failed", "success")]
    assert fixed_label_selections(expr, {"p": {"gpuplan.dev/pool": "p"}}) == []
