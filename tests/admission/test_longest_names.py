"""Names at their longest accepted length still give objects the API server accepts:
every name, label value and derived name fits (GP115 refuses a Flux fleet name that would not)."""

from __future__ import annotations

import re

import pytest

from gpuplan.compiler import compile_fleet
from tests.conformance.test_conformance_schemas import validate
from tests.outputkit import all_objects

N63 = "a" * 61 + "-z"  # 63 characters
MIG55 = "m" * 53 + "-z"  # a long MIG pool name: its mig.config label value is shortened to fit


def _spec(engine: str) -> str:
    fleet = ("f" * 40 + "-z") if engine == "flux" else N63  # 42 with Flux (GP115)
    return f"""\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {{name: {fleet}}}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {{engine: {engine}, repoURL: "https://git.example.com/fleet.git"}}
    gpuOperator: {{toolkit: preinstalled}}
    aws: {{clusterName: {N63}, nodeRole: r}}
  pools:
    - name: {MIG55}
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [{"n" * 250 + ".io"}]
      sharing: {{mode: mig, layout: {{1g.10gb: 7}}}}
      labels: {{{"example." + "d" * 240 + "/" + "k" * 63}: {"v" * 63}}}
    - name: {"k" * 61 + "-z"}
      gpu: H100-SXM5-80GB
      karpenter: {{instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714, nodeOverlay: true}}
      sharing: {{mode: time-slicing, replicas: 4}}
  tiers:
    - {{name: {"t" * 61 + "-z"}, pool: {MIG55}, profile: 1g.10gb, enforcePriority: true, priority: 100}}
    - {{name: {"s" * 61 + "-z"}, pool: {"k" * 61 + "-z"}, workload: inference, priority: 50}}
  tenants:
    - name: {"e" * 61 + "-z"}
      namespaces: [{N63}]
      quotas: {{{N63}: {{{"t" * 61 + "-z"}: 7, {"s" * 61 + "-z"}: 8}}}}
"""


LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")


def _label_maps(obj: dict):
    """metadata.labels, NodePool template labels, NodeFeatureRule rule labels."""
    yield obj["metadata"].get("labels") or {}
    spec = obj.get("spec") or {}
    yield ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for rule in spec.get("rules") or ():
        yield rule.get("labels") or {}


@pytest.mark.parametrize("engine", ["argocd", "flux"])
def test_longest_names_make_valid_objects(tmp_path, engine):
    path = tmp_path / "fleet.yaml"
    path.write_text(_spec(engine), encoding="utf-8")
    out = compile_fleet(path, out_dir=tmp_path / "generated")
    errors = [d for d in out.diagnostics if d.is_error]
    assert errors == [] and out.files, errors
    objs = all_objects(out)
    assert {"NodePool", "EC2NodeClass", "NodeFeatureRule", "ResourceQuota", "PriorityClass"} <= {o["kind"] for _, o in objs}
    for where, obj in objs:
        try:
            validate(obj)
        except Exception as exc:  # noqa: BLE001 - name the object in the failure
            pytest.fail(f"{where}: {obj['kind']} {obj['metadata'].get('name')}: {exc}")
        # what the schemas leave to the API server's Go validation: names and label values
        name = obj["metadata"]["name"]
        assert len(name) <= (63 if obj["kind"] in ("Namespace", "NodePool", "EC2NodeClass") else 253), name
        for labels in _label_maps(obj):
            for key, value in labels.items():
                assert len(value) <= 63 and LABEL_VALUE.match(value), f"{where}: {key}={value!r}"
        if engine == "flux" and obj["kind"] == "Kustomization":
            assert len(name) <= 63  # kustomize-controller's kustomize.toolkit.fluxcd.io/name label


def test_one_character_more_is_refused_at_the_name(tmp_path):
    text = _spec("flux").replace("f" * 40 + "-z", "f" * 41 + "-z").replace(MIG55, "x" + MIG55)
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    codes = sorted(d.code for d in compile_fleet(path).diagnostics if d.is_error)
    assert codes == ["GP115"]  # the fleet name; the MIG config name is shortened to fit
