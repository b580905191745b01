"""Derived Argo CD Application names are object names the API server and Argo CD accept
(DNS-1123 subdomains), and cluster.aws.nodeRole is a role name IAM accepts once Karpenter has
dropped its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import compile_fleet
from gpuplan.rules.admission import subdomain_problem
from tests.outputkit import all_objects
from tests.rules.helpers import only, position

REPO = Path(__file__).resolve().parents[2]
N63 = "a" * 61 + "-z"


@pytest.mark.parametrize("name,bad", [
    ("gpuplan-ml", False), ("gpuplan-" + N63 + "-gpu-operator", False), ("a.b-c", False), ("a" * 253, False),
    ("a" * 254, True), ("Gpuplan", True), ("gpuplan-", True), ("-gpuplan", True), ("gp_plan", True),
    ("a..b", True), ("", True),
])
def test_subdomain_rule(name, bad):
    assert (subdomain_problem(name) is not None) is bad


@pytest.mark.parametrize("example,suffixes", [
    ("fleet.yaml", ("", "-gpu-operator")),
    ("kueue.yaml", ("", "-gpu-operator", "-kueue")),
    ("dra.yaml", ("", "-dra-driver")),
])
def test_longest_fleet_name_gives_valid_application_names(tmp_path, example, suffixes):
    text = (REPO / "examples" / example).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.startswith("metadata:"))
    j = next(j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("name:"))
    lines[j] = lines[j].split("name:")[0] + f"name: {N63}\n"
    path = tmp_path / "fleet.yaml"
    path.write_text("".join(lines), encoding="utf-8")
    out = compile_fleet(path, out_dir=tmp_path / "generated")
    assert [d for d in out.diagnostics if d.is_error] == []
    apps = sorted(o["metadata"]["name"] for _, o in all_objects(out) if o["kind"] == "Application")
    for suffix in suffixes:
        assert f"gpuplan-{N63}{suffix}" in apps
    assert all(subdomain_problem(a) is None for a in apps), apps


def test_rule_reports_an_invalid_application_name_at_metadata_name(tmp_path, monkeypatch):
    """If a derived name ever stops being a subdomain, GP115 reports it at metadata.name."""
    import gpuplan.identity as identity

    monkeypatch.setattr(identity, "kueue_app_name", lambda rf: f"gpuplan-{rf.fleet.metadata.name}-" + "q" * 250)
    text = (REPO / "examples" / "fleet.yaml").read_text(encoding="utf-8")
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    from gpuplan.compiler import check_fleet

    d = only(check_fleet(path).diagnostics, "GP115")
    assert "Argo CD Application" in d.message and "at most 253" in d.message
    assert d.line == position(text, "metadata:")[0] + 1


KARP = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {repoURL: "https://git.example.com/t.git"}
    aws: {clusterName: t, nodeRole: ROLE}
  pools:
    - name: infer
      gpu: L40S
      karpenter: {instanceTypes: [g6e.xlarge], maxGPUs: 8, amiVersion: v20260714}
"""


@pytest.mark.parametrize("role,why", [
    ('"Karpenter Node Role"', "only letters"),
    ("r" * 65, "65 characters"),
    ('"arn:aws:iam::123456789012:role/"', "empty"),
    ('"KarpenterNodeRole:prod"', "only letters"),
    ('"nodes/role*"', "only letters"),
    ('"rôle"', "only letters"),
    ('"/karpenter/"', "empty"),
])
def test_node_role_refused(run, role, why):
    text = KARP.replace("ROLE", role)
    d = only(run(text), "GP632")
    assert (d.line, d.col) == position(text, role)
    assert why in d.message and d.hint


@pytest.mark.parametrize("role", [
    "KarpenterNodeRole-ml-platform", "r" * 64, '"arn:aws:iam::123456789012:role/KarpenterNodeRole-x"',
    '"/nodes/gpu/Role_1+=,.@-"', '"path/' + "r" * 64 + '"', "a",
])
def test_node_role_accepted(run, role):
    assert "GP632" not in run.codes(KARP.replace("ROLE", role))


def test_node_role_not_checked_without_karpenter_pools(run):
    text = KARP.replace("ROLE", '"Karpenter Node Role"').replace(
        "      karpenter: {instanceTypes: [g6e.xlarge], maxGPUs: 8, amiVersion: v20260714}\n",
        "      gpusPerNode: 4\n      nodes: [n1]\n")
    assert "GP632" not in run.codes(text)
