"""The CEL rules of the pinned CRDs, mirrored at the spec line (gpuplan.rules.admission).

For each bad spec: the object gpuplan would emit if it did not check (lowered
with the rules skipped) is refused by the real CEL rule, evaluated with
gpuplan's CEL engine (gpuplan.verify.cel); and `gpuplan validate` refuses the spec at the line of the value,
with the mirroring code and a hint. Good specs pass both."""

from __future__ import annotations

import pytest

from gpuplan.compiler import check_fleet
from gpuplan.rules.admission import CEL_RULES
from tests.admission.celkit import cel_file, refusals, schema_errors
from tests.rules.helpers import position

KARPENTER = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {repoURL: "https://git.example.com/t.git"}
    aws: {clusterName: t, nodeRole: KarpenterNodeRole-t}
  pools:
    - name: train
      gpu: H100-SXM5-80GB
      labels: {LABEL: "x"}
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: AMI}
"""
NODEPOOL = "nodepool-karpenter-v1.cel.json"
NODECLASS = "ec2nodeclass-karpenter-v1.cel.json"


def _unchecked_objects(path):
    """What gpuplan would emit with its checks skipped."""
    from gpuplan.lower.driver import lower_all
    from gpuplan.resolve import resolve
    from gpuplan.spec.loader import load_file
    from gpuplan.spec.validate import parse_fleet

    doc = load_file(path)
    fleet, diags = parse_fleet(doc)
    assert fleet is not None, diags
    return [d for a in lower_all(resolve(fleet, doc)) for d in (a.documents or ())]


def _kind(objs, kind):
    return [o for o in objs if o.get("kind") == kind]


def _spec(tmp_path, label="example.com/team", ami="v20260714", name="fleet.yaml"):
    text = KARPENTER.replace("LABEL", label).replace("AMI", ami)
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p, text


BAD_LABELS = [
    "karpenter.sh/team",
    "karpenter.sh/nodepool",
    "kubernetes.io/hostname",
    "karpenter.k8s.aws/instance-foo",
    "sub.karpenter.sh/x",
    "karpenter.sh",  # no '/': the whole key is the CEL rule's "domain"
]
GOOD_LABELS = ["example.com/team", "karpenter.sh/capacity-type", "karpenter.k8s.aws/instance-family",
               "node.kubernetes.io/role", "team"]


@pytest.mark.parametrize("label", BAD_LABELS)
def test_restricted_template_label_refused_by_cel_and_by_validate(tmp_path, label):
    path, text = _spec(tmp_path, label=label)
    nodepool = _kind(_unchecked_objects(path), "NodePool")[0]
    assert refusals(nodepool, NODEPOOL), f"the NodePool CRD accepts {label}?"
    d = [d for d in check_fleet(path).diagnostics if d.code == "GP621"]
    assert len(d) == 1, d
    assert (d[0].line, d[0].col) == position(text, label + ":")
    assert d[0].hint and "example.com/" in d[0].hint


@pytest.mark.parametrize("label", GOOD_LABELS)
def test_allowed_template_label_passes_cel_and_validate(tmp_path, label):
    path, _ = _spec(tmp_path, label=label)
    nodepool = _kind(_unchecked_objects(path), "NodePool")[0]
    assert refusals(nodepool, NODEPOOL) == []
    assert not [d for d in check_fleet(path).diagnostics if d.is_error]


@pytest.mark.parametrize("ami,refused_by", [
    ("v1.40.0-nvidia-aaaaaaaaaaaaaaaaaa", "schema"),  # alias longer than maxLength 30
    ("'@v1'", None),  # al2023@@v1: the CRD accepts it, Karpenter finds no such AMI release
    ("v2026-08-01", None),
])
def test_bad_ami_version(tmp_path, ami, refused_by):
    path, text = _spec(tmp_path, ami=ami)
    d = [d for d in check_fleet(path).diagnostics if d.code == "GP625"]
    assert len(d) == 1 and d[0].hint
    assert (d[0].line, d[0].col) == position(text, ami + "}")
    nodeclass = _kind(_unchecked_objects(path), "EC2NodeClass")[0]
    if refused_by == "schema":
        assert any("is too long" in e for e in schema_errors(nodeclass))


@pytest.mark.parametrize("ami", ["latest", "v20260714"])
def test_good_ami_version(tmp_path, ami):
    path, _ = _spec(tmp_path, ami=ami)
    assert not [d for d in check_fleet(path).diagnostics if d.code == "GP625"]
    nodeclass = _kind(_unchecked_objects(path), "EC2NodeClass")[0]
    assert refusals(nodeclass, NODECLASS) == [] and schema_errors(nodeclass) == []


@pytest.mark.parametrize("tags,bad", [
    ("{kubernetes.io/role/internal-elb: ''}", True),
    ("{'': x}", True),
    ("{karpenter.sh/discovery: t, env: ''}", True),
    ("{kubernetes.io/role/internal-elb: '1'}", False),
    ("{karpenter.sh/discovery: '*'}", False),
])
def test_selector_tags(tmp_path, tags, bad):
    text = KARPENTER.replace("LABEL", "example.com/team").replace("AMI", "v20260714").replace(
        "nodeRole: KarpenterNodeRole-t}", f"nodeRole: KarpenterNodeRole-t, subnetTags: {tags}}}")
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    nodeclass = _kind(_unchecked_objects(path), "EC2NodeClass")[0]
    assert bool(refusals(nodeclass, NODECLASS)) == bad
    ds = [d for d in check_fleet(path).diagnostics if d.code == "GP626"]
    assert bool(ds) == bad
    for d in ds:
        assert d.line == position(text, "subnetTags")[0] and d.hint


def test_every_cel_rule_of_the_emitted_crds_is_accounted_for():
    """CEL_RULES covers the pinned CEL files of every CRD gpuplan emits, no more, no less."""
    files = {k[0] for k in CEL_RULES} | {"application-argoproj-v1alpha1.cel.json",
                                         "nodefeaturerule-nfd-v1alpha1.cel.json",
                                         "helmrepository-source-v1.cel.json"}
    pinned = {(f, r["path"], r["message"]) for f in files for r in cel_file(f)}
    assert pinned == set(CEL_RULES)
    for where in CEL_RULES.values():
        assert where.startswith(("GP", "fixed by gpuplan", "gpuplan never sets"))


def test_good_example_output_passes_every_cel_rule(tmp_path):
    from pathlib import Path

    from gpuplan.compiler import compile_fleet
    import yaml

    spec = Path(__file__).resolve().parents[2] / "examples" / "aws-burst.yaml"
    out = compile_fleet(spec)
    assert out.files
    by_kind = {"NodePool": NODEPOOL, "EC2NodeClass": NODECLASS, "NodeOverlay": "nodeoverlay-karpenter-v1alpha1.cel.json",
               "HelmRelease": "helmrelease-helm-v2.cel.json"}
    seen = set()
    for name, body in out.files.items():
        if not name.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(body):
            if isinstance(doc, dict) and doc.get("kind") in by_kind:
                seen.add(doc["kind"])
                assert refusals(doc, by_kind[doc["kind"]]) == [], doc["kind"]
    assert {"NodePool", "EC2NodeClass"} <= seen
