"""mig-parted ConfigMap: key config.yaml, version v1, one config per MIG pool."""

from __future__ import annotations

import re

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.identity import MIG_PARTED_CONFIGMAP as CONFIGMAP_NAME, mig_config_name as config_name

PATH = "gpu-operator/mig-parted-config.yaml"
ENTRY_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}


def _config(c) -> dict:
    cm = one(c, PATH)
    assert cm["metadata"]["name"] == CONFIGMAP_NAME
    assert list(cm["data"]) == ["config.yaml"], "mig-manager reads only the key config.yaml"
    return yaml.safe_load(cm["data"]["config.yaml"])


def _pool_config(c, pool: str) -> list:
    return _config(c)["mig-configs"][config_name(c.resolved.pool_by_name[pool])]


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_schema(examples, example):
    c = examples[example]
    cfg = _config(c)
    assert list(cfg) == ["version", "mig-configs"]
    assert cfg["version"] == "v1"
    configs = cfg["mig-configs"]
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert set(configs) == {"all-disabled"} | {config_name(pv) for pv in c.resolved.pools if config_name(pv)}
    for name, entries in configs.items():
        assert isinstance(entries, list) and entries, name
        for e in entries:
            assert set(e) <= ENTRY_KEYS, (name, e)
            assert e["devices"] == "all" or (isinstance(e["devices"], list)
                                              and all(type(i) is int for i in e["devices"]))
            assert type(e["mig-enabled"]) is bool
            assert ("mig-devices" in e) is e["mig-enabled"]
            for f in e.get("device-filter", []):
                assert re.fullmatch(r"0x[0-9A-F]{4}10DE", f), f
            for profile, count in e.get("mig-devices", {}).items():
                assert isinstance(profile, str) and type(count) is int and count > 0


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_geometry_accepted_by_the_mig_parted_checker(examples, example):
    from gpuplan.mig.migparted import check_mig_parted_text

    text = one(examples[example], PATH)["data"]["config.yaml"]
    report = check_mig_parted_text(text, "config.yaml")
    assert report.ok, report.diagnostics
    assert report.configs >= 2


def test_uniform_layout_is_devices_all(examples):
    entries = _pool_config(examples["argocd"], "infer-a100")
    assert entries == [{
        "device-filter": ["0x20B210DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
    }]


def test_per_gpu_layouts(examples):
    entries = _pool_config(examples["flux"], "infer-h100")
    f = ["0x233010DE"]
    assert entries == [
        {"device-filter": f, "devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": f, "devices": [4, 5], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"device-filter": f, "devices": [6, 7], "mig-enabled": False},
    ]


def test_same_layouts_are_grouped_by_first_index(build):
    c = build(fleet("""\
  pools:
    - name: p
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [n1]
      sharing:
        mode: mig
        devices:
          - {devices: [2], layout: {7g.80gb: 1}}
          - {devices: [0], layout: {7g.80gb: 1}}
          - {devices: [3, 1]}
"""))
    entries = _pool_config(c, "p")
    assert [(e["devices"], e["mig-enabled"]) for e in entries] == [([0, 2], True), ([1, 3], False)]


def test_no_configmap_without_mig_capable_gpus(build):
    c = build(fleet("""\
  pools:
    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}
"""))
    assert PATH not in c.files
    values = one(c, "gpu-operator/values.yaml")
    assert values["migManager"] == {"enabled": False}


def test_mig_capable_exclusive_pool_keeps_mig_manager(build):
    c = build(fleet("""\
  pools:
    - {name: p, gpu: A100-SXM4-80GB, gpusPerNode: 4, nodes: [n1]}
"""))
    assert _config(c)["mig-configs"] == {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    assert one(c, "gpu-operator/values.yaml")["migManager"]["enabled"] is True
