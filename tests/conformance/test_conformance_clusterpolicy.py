"""The Helm values agree with the ClusterPolicy CRD the chart renders them into.

We do not emit the ClusterPolicy (the chart does); this builds the part of its
``spec`` the chart derives from the keys gpuplan sets (as
``templates/clusterpolicy.yaml`` does: ``mig.strategy`` only when non-empty,
``devicePlugin.config``/``migManager.config`` without ``create``/``data``) and
validates it against the strict CRD schema."""

from __future__ import annotations

import copy

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.upstream.pins import crd_schema
from gpuplan.verify.verifier import Verifier


def schema() -> dict:
    s = crd_schema("nvidia.com", "ClusterPolicy", "v1")
    assert s is not None, "ClusterPolicy v1 is not pinned in gpuplan/upstream"
    return s


def cluster_policy(values: dict) -> dict:
    spec: dict = {k: {} for k in schema()["properties"]["spec"]["required"]}
    if values["daemonsets"].get("tolerations"):
        spec["daemonsets"]["tolerations"] = values["daemonsets"]["tolerations"]
    spec["mig"] = {"strategy": values["mig"]["strategy"]} if values["mig"].get("strategy") else {}
    spec["driver"] = {"enabled": values["driver"]["enabled"]}
    if "version" in values["driver"]:
        spec["driver"]["version"] = values["driver"]["version"]
    spec["toolkit"] = {"enabled": values["toolkit"]["enabled"]}
    dp = values["devicePlugin"]
    spec["devicePlugin"] = {"enabled": dp["enabled"]}
    if dp["config"].get("name"):
        spec["devicePlugin"]["config"] = {"name": dp["config"]["name"], "default": dp["config"]["default"]}
    spec["gfd"] = {"enabled": values["gfd"]["enabled"]}
    mm = values["migManager"]
    spec["migManager"] = {"enabled": mm["enabled"]}
    if "config" in mm:
        spec["migManager"]["config"] = {"name": mm["config"]["name"], "default": mm["config"]["default"]}
    de = values["dcgmExporter"]
    spec["dcgmExporter"] = {"enabled": de["enabled"], "serviceMonitor": dict(de["serviceMonitor"])}
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "spec": spec}


def _errors(obj: dict) -> list[str]:
    found, _, _ = Verifier().check(obj)
    return [f"{p.code.code} {list(p.path)}: {p.message}" for p in found]


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_values_render_a_valid_cluster_policy(examples, example):
    values = one(examples[example], "gpu-operator/values.yaml")
    cp = cluster_policy(values)
    assert not _errors(cp), _errors(cp)
    assert cp["spec"]["migManager"]["config"]["default"] in ("all-disabled", "")


def test_empty_strategy_is_left_out(build):
    c = build(fleet("""\
  pools:
    - name: m
      gpu: A100-SXM4-80GB
      gpusPerNode: 2
      nodes: [m1]
      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}
    - name: s
      gpu: L40S
      gpusPerNode: 2
      nodes: [s1]
      sharing: {mode: mps, replicas: 4}
"""))
    values = one(c, "gpu-operator/values.yaml")
    assert values["mig"]["strategy"] == ""
    cp = cluster_policy(values)
    assert "strategy" not in cp["spec"]["mig"]
    assert not _errors(cp)
    bad = copy.deepcopy(cp)
    bad["spec"]["mig"]["strategy"] = ""  # what a chart without the guard would render
    assert _errors(bad), "the CRD enum must reject an empty strategy (the check is live)"


def test_check_is_live_for_mig_manager_default(examples):
    cp = cluster_policy(one(examples["argocd"], "gpu-operator/values.yaml"))
    cp["spec"]["migManager"]["config"]["default"] = "gpuplan-infer-a100"
    assert _errors(cp)
    del cp["spec"]["migManager"]["config"]["default"]
    cp["spec"]["devicePlugin"]["config"]["create"] = False  # not a CR field
    assert _errors(cp)


def test_values_yaml_is_a_plain_map(examples):
    for c in examples.values():
        docs = [d for d in yaml.safe_load_all(c.files["gpu-operator/values.yaml"]) if d is not None]
        assert len(docs) == 1 and isinstance(docs[0], dict)
