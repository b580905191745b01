"""A sweep of hostile values through the fields that reach Karpenter objects: whatever
`gpuplan validate` accepts, the emitted NodePool, EC2NodeClass and NodeOverlay pass their
pinned strict schema and every CEL rule (gpuplan.verify.cel); nothing raises."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet
from gpuplan.lower.karpenter import karpenter_pools, nodeoverlay, nodepool
from gpuplan.lower.karpenter_aws import ec2nodeclass
from gpuplan.render.yamlwriter import dump_documents_bytes
from tests.admission.celkit import refusals, schema_errors

SPEC = Path(__file__).resolve().parents[2] / "examples" / "aws-burst.yaml"
CEL = {"NodePool": "nodepool-karpenter-v1.cel.json", "EC2NodeClass": "ec2nodeclass-karpenter-v1.cel.json",
       "NodeOverlay": "nodeoverlay-karpenter-v1alpha1.cel.json"}
VALUES = ["", "x" * 64, "karpenter.sh/x", "kubernetes.io/hostname", "karpenter.k8s.aws/x", "a b", "*",
          "v20260714", "v1.2.3", "latest"]


def _set_key(d: dict, old: str, new: str) -> None:
    d[new] = d.pop(old)


MUTATIONS = {
    "pool label key": lambda s, v: s["pools"][2].setdefault("labels", {}).__setitem__(v, "x"),
    "pool label value": lambda s, v: s["pools"][2].setdefault("labels", {}).__setitem__("example.com/x", v),
    "amiVersion": lambda s, v: s["pools"][0]["karpenter"].__setitem__("amiVersion", v),
    "zone": lambda s, v: s["pools"][2]["karpenter"].__setitem__("zones", [v]),
    "subnet tag key": lambda s, v: s["cluster"]["aws"].__setitem__("subnetTags", {v: "1"}),
    "subnet tag value": lambda s, v: s["cluster"]["aws"].__setitem__("subnetTags", {"example.com/x": v}),
    "nodeRole": lambda s, v: s["cluster"]["aws"].__setitem__("nodeRole", v),
    "taint key": lambda s, v: s["pools"][2].__setitem__("taints", [{"key": v, "effect": "NoSchedule"}]),
}


@pytest.fixture(scope="module")
def base():
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(SPEC.read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("what", MUTATIONS)
def test_accepted_values_are_accepted_by_the_crds(tmp_path, base, what):
    accepted = 0
    for value in VALUES:
        data = copy.deepcopy(base)
        MUTATIONS[what](data["spec"], value)
        path = tmp_path / "fleet.yaml"
        path.write_text(json.dumps(data), encoding="utf-8")
        checked = check_fleet(path)
        if checked.failed():
            assert all(d.line for d in checked.diagnostics if d.is_error), checked.diagnostics
            continue
        accepted += 1
        rf = checked.resolved
        for pv in karpenter_pools(rf):
            # the objects as written: through the YAML writer and back
            for doc in yaml.safe_load_all(dump_documents_bytes(
                    [o for o in (nodepool(rf, pv), ec2nodeclass(rf, pv), nodeoverlay(rf, pv)) if o])):
                problems = schema_errors(doc) + refusals(doc, CEL[doc["kind"]])
                assert problems == [], f"{what}={value!r}: {doc['kind']} refused: {problems}"
    assert accepted  # the sweep reached the objects at least once
