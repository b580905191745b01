"""Device-plugin ConfigMap: one config per pool, facts of k8s-device-plugin v0.20.0."""

from __future__ import annotations

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP as CONFIGMAP_NAME, DEFAULT_CONFIG, cluster_mig_strategy, plugin_config_key as config_key, pool_mig_strategy

PATH = "gpu-operator/device-plugin-config.yaml"
ALLOWED_TOP = {"version", "flags", "sharing"}
STRATEGIES = {"none", "single", "mixed"}


def _walk_keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_keys(v)


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_one_config_per_pool_plus_default(examples, example):
    c = examples[example]
    cm = one(c, PATH)
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == CONFIGMAP_NAME
    assert cm["metadata"]["namespace"] == c.resolved.fleet.spec.cluster.gpu_operator.namespace
    expected = {DEFAULT_CONFIG} | {config_key(c.resolved, pv) for pv in c.resolved.pools}
    assert set(cm["data"]) == expected


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_payloads_follow_the_facts(examples, example):
    c = examples[example]
    data = one(c, PATH)["data"]
    by_key = {config_key(c.resolved, pv): pv for pv in c.resolved.pools}
    for key, text in data.items():
        assert isinstance(text, str) and text.endswith("\n")
        cfg = yaml.safe_load(text)
        assert set(cfg) <= ALLOWED_TOP, key
        assert cfg["version"] == "v1"
        assert cfg["flags"]["migStrategy"] in STRATEGIES
        keys = set(_walk_keys(cfg))
        assert "rename" not in keys and "devices" not in keys, f"{key}: ignored upstream fields emitted"
        assert "resources" not in cfg, "top-level resources are ignored by the plugin"
        pv = by_key.get(key)
        s = pv.pool.sharing if pv is not None else None
        if s is None or s.mode in ("exclusive", "mig"):
            assert "sharing" not in cfg, key
            if s is not None and s.mode == "mig":
                assert cfg["flags"]["migStrategy"] == s.strategy
            continue
        assert list(cfg["sharing"]) == [{"time-slicing": "timeSlicing", "mps": "mps"}[s.mode]]
        block = cfg["sharing"]["timeSlicing" if s.mode == "time-slicing" else "mps"]
        assert block["renameByDefault"] is s.rename_by_default
        assert block["failRequestsGreaterThanOne"] is s.fail_requests_greater_than_one
        assert block["resources"] == [{"name": "nvidia.com/gpu", "replicas": s.replicas}]
        assert block["resources"][0]["replicas"] >= 2
        if s.mode == "mps":
            assert block["resources"][0]["replicas"] <= 48
            # k8s-device-plugin validateFlags: "using --mig-strategy=mixed is not supported with MPS"
            assert cfg["flags"]["migStrategy"] != "mixed"


def _data(c, pool: str) -> str:
    return one(c, PATH)["data"][config_key(c.resolved, c.resolved.pool_by_name[pool])]


def test_example_time_slicing_and_mps(examples):
    ts = yaml.safe_load(_data(examples["argocd"], "dev-a100"))
    assert ts["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    mps = yaml.safe_load(_data(examples["flux"], "interactive-l40s"))
    assert mps["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 8}]
    assert mps["flags"]["migStrategy"] == "none"


POOL = """\
    - name: {name}
      gpu: {gpu}
      gpusPerNode: 4
      nodes: [{name}-01]
      sharing: {sharing}
"""


def _pools(*pools: tuple[str, str, str]) -> str:
    return "  pools:\n" + "".join(POOL.format(name=n, gpu=g, sharing=s) for n, g, s in pools)


MIXED = "{mode: mig, strategy: mixed, layout: {3g.40gb: 2}}"
SINGLE = "{mode: mig, strategy: single, layout: {3g.40gb: 2}}"
MPS = "{mode: mps, replicas: 4}"
TS = "{mode: time-slicing, replicas: 2}"


@pytest.mark.parametrize(
    ("pools", "expected"),
    [
        ([("a", "A100-SXM4-80GB", "{mode: exclusive}"), ("b", "L40S", TS)], "none"),
        ([("a", "A100-SXM4-80GB", MIXED), ("b", "L40S", TS)], "mixed"),
        ([("a", "A100-SXM4-80GB", SINGLE), ("b", "L40S", MPS)], "single"),
        ([("a", "A100-SXM4-80GB", MIXED), ("b", "L40S", MPS)], ""),
        ([("a", "A100-SXM4-80GB", MIXED), ("b", "A100-SXM4-80GB", SINGLE)], ""),
    ],
)
def test_cluster_strategy(build, pools, expected):
    c = build(fleet(_pools(*pools)))
    assert cluster_mig_strategy(c.resolved) == expected
    values = one(c, "gpu-operator/values.yaml")
    assert values["mig"]["strategy"] == expected
    for name, _, sharing in pools:
        got = yaml.safe_load(_data(c, name))["flags"]["migStrategy"]
        own = "single" if "single" in sharing else "mixed" if "mig" in sharing else "none"
        # the file says the pool's own strategy, so its name depends on the pool alone (#27);
        # a cluster-wide value reaches the plugin as MIG_STRATEGY, which overrides the file
        assert got == own
        assert pool_mig_strategy(c.resolved, c.resolved.pool_by_name[name]) == (expected or own)


def test_config_names_stay_label_values():
    from gpuplan.identity import content_name
    from gpuplan.k8snames import LABEL_VALUE

    for prefix in ("a", "p" * 63, "gpuplan-" + "x" * 63, "ab-" * 21):
        name = content_name(prefix, {"k": prefix})
        assert len(name) <= 63 and LABEL_VALUE.match(name), name
