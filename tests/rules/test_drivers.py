"""GP650-GP651: the managed driver against each static pool's GPU (floor) and OS
(precompiled images), from gpuplan/catalog/drivers.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.catalog import all_gpus
from gpuplan.catalog.drivers import below_floor, driver_floor, source
from tests.rules.helpers import BASE, edit, only, position

DATA = Path(__file__).resolve().parents[2] / "gpuplan" / "catalog" / "drivers.json"


def _with_driver(text: str, version: str) -> str:
    return edit(text, "    gitops:", f"    gpuOperator: {{driverVersion: \"{version}\"}}\n    gitops:")


def _b200() -> str:
    return edit(BASE, "      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]",
                "      gpu: B200\n      gpusPerNode: 8\n      nodes: [n1, n2]")


def test_table_names_its_source_and_only_catalog_models():
    src = source()
    assert src["repository"] == "NVIDIA/open-gpu-kernel-modules" and len(src["newest_commit"]) == 40
    keys = {g.key for g in all_gpus()}
    data = json.loads(DATA.read_text())
    assert set(data["gpus"]) <= keys and set(data["unchecked"]) <= keys
    assert set(data["gpus"]) | set(data["unchecked"]) == keys  # every model is either checked or says why not
    for key in data["gpus"]:
        f = driver_floor(key)
        assert f is not None and f.first == f.branches[0][1] and len(f.first_commit) == 40


@pytest.mark.parametrize(("gpu", "driver", "need"), [
    ("B200", "535.104.05", "570.86.15"),
    ("B200", "570.86.10", "570.86.15"),   # the first branch that lists it, from one release on
    ("B200", "570.86.15", None),
    ("B200", "R535", "R570"),
    ("B200", "R570", None),
    ("RTX-PRO-6000-BLACKWELL-SERVER", "575.51.02", "575.57.08"),
    ("RTX-PRO-6000-BLACKWELL-SERVER", "580.65.06", None),
    ("H200-SXM-141GB", "535.183.06", "550.40.65"),
    ("A100-SXM4-80GB", "450.80.02", None),  # Ampere: not checked (predates the open modules)
])
def test_below_floor(gpu, driver, need):
    assert below_floor(gpu, driver) == need


def test_b200_pool_with_an_r535_release_is_refused_at_its_line(run):
    text = _with_driver(_b200(), "535.104.05")
    d = only(run(text), "GP650")
    assert d.is_error and (d.line, d.col) == position(text, "B200") and d.path == "spec.pools[0].gpu"
    assert "570.86.15" in d.message and "570.86.15" in d.hint
    assert run.codes(_with_driver(_b200(), "595.91.07"), "GP65") == []


def test_chart_default_driver_is_checked_too(run):
    # no driverVersion: the managed driver is the chart's default (595.91.07 for v26.7.0): fine for B200
    assert run.codes(_b200(), "GP65") == []


def test_karpenter_pools_run_their_ami_driver(run):
    text = _with_driver(edit(BASE, "    gitops:", "    aws: {clusterName: c, nodeRole: r}\n    gitops:")
                        .replace("  tiers:", "    - name: burst\n      gpu: B200\n      karpenter: "
                                 "{instanceTypes: [p6-b200.48xlarge], maxGPUs: 8, amiVersion: v20260714}\n  tiers:", 1),
                        "535.104.05")
    assert "GP650" not in run.codes(text)


def test_precompiled_needs_ubuntu_2204_on_every_static_pool(run):
    text = _with_driver(BASE, "R570")
    d = only(run(text), "GP651")
    assert d.is_error and d.path == "spec.cluster.gpuOperator.driverVersion"
    assert (d.line, d.col) == position(text, '"R570"') and "ubuntu22.04" in d.hint
    for pool in ("nodes: [n1, n2]", "nodes: [n3]"):
        text = edit(text, pool, pool + "\n      os: ubuntu22.04")
    assert "GP651" in run.codes(text)  # one pool still unsaid
    text = edit(text, "nodes: [n4]", "nodes: [n4]\n      os: ubuntu22.04")
    assert run.codes(text, "GP65") == []
    assert run.codes(_with_driver(BASE, "570.133.20"), "GP65") == []  # a full release compiles anywhere
