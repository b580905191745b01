"""`gpuplan verify`: hand-written and generated trees against the pinned
upstream schemas and CEL rules, through the real CLI where it matters."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from tests.conftest import REPO, run_gpuplan

from gpuplan.verify.verifier import Options, Verifier, verify_paths

NODEPOOL = """\
# a hand-written NodePool (comments and all)
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    metadata:
      labels:
        team: ml
        karpenter.sh/foo: bar
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements:
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: ["0"]}
"""

EC2NODECLASS = """\
apiVersion: v1
kind: Namespace
metadata: {name: karpenter-extra}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: gpu
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-ml
  instanceProfile: KarpenterNodeInstanceProfile-ml
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: ml}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: ml}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def by_code(result, code: str) -> list:
    return [d for d in result.diagnostics if d.code == code]


# --- the two cases JSON Schema cannot see ------------------------------------------------


def test_cli_flags_restricted_label_and_ec2nodeclass_rule_at_file_and_line(tmp_path):
    write(tmp_path, "pools/nodepool.yaml", NODEPOOL)
    write(tmp_path, "pools/ec2nodeclass.yaml", EC2NODECLASS)
    r = run_gpuplan("verify", "--format", "json", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    diags = json.loads(r.stdout)["diagnostics"] if isinstance(json.loads(r.stdout), dict) else json.loads(r.stdout)
    errors = [d for d in diags if d["severity"] == "error"]
    got = {(Path(d["file"]).name, d["line"], d["col"], d["code"]) for d in errors}
    # the label key, and the `spec:` of the EC2NodeClass (the rule sits on spec)
    assert got == {("nodepool.yaml", 11, 9, "GP840"), ("ec2nodeclass.yaml", 9, 1, "GP840")}, errors
    msgs = {d["message"] for d in errors}
    assert 'NodePool gpu: label domain "karpenter.sh" is restricted' in msgs
    assert "EC2NodeClass gpu: must specify exactly one of ['role', 'instanceProfile']" in msgs


def test_text_output_shows_the_line_and_a_summary(tmp_path):
    write(tmp_path, "nodepool.yaml", NODEPOOL)
    r = run_gpuplan("verify", "nodepool.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert "nodepool.yaml:11:9: error[GP840]: NodePool gpu: label domain \"karpenter.sh\" is restricted" in r.stderr
    assert "11 |         karpenter.sh/foo: bar" in r.stderr
    assert "1 objects in 1 files: 1 against pinned CRDs" in r.stderr
    assert "Traceback" not in r.stderr


def test_fixing_the_label_passes(tmp_path):
    write(tmp_path, "nodepool.yaml", NODEPOOL.replace("karpenter.sh/foo", "example.com/foo"))
    r = verify_paths([str(tmp_path)])
    assert r.ok, r.diagnostics
    assert r.stats.cel_evaluations > 10  # the rules ran, they did not just go missing


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["github", "sarif", "json"])
def test_machine_formats(tmp_path, fmt):
    write(tmp_path, "nodepool.yaml", NODEPOOL)
    r = run_gpuplan("verify", "--format", fmt, "nodepool.yaml", cwd=tmp_path)
    assert r.returncode == 1
    if fmt == "github":
        assert "::error file=nodepool.yaml,line=11,col=9,title=gpuplan GP840::" in r.stdout
    elif fmt == "sarif":
        doc = json.loads(r.stdout)
        [res] = [x for x in doc["runs"][0]["results"] if x["level"] == "error"]
        assert res["ruleId"] == "GP840"
        assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": 11, "startColumn": 9}
    else:
        assert "GP840" in r.stdout


# --- rules, engine and Kubernetes semantics -------------------------------------------------


def check(obj: dict) -> list[tuple[str, tuple, str]]:
    found, _, _ = Verifier().check(obj)
    return [(p.code.code, p.path, p.message) for p in found]


def nodepool(**template_spec) -> dict:
    spec = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
    spec.update(template_spec)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": spec}}}


def test_find_and_int_as_kubernetes_defines_them():
    assert check(nodepool()) == []
    # find("^([^/]+)") reads the domain: a key *ending* in karpenter.sh is restricted, one containing it is not
    bad = nodepool(requirements=[{"key": "foo.karpenter.sh/x", "operator": "Exists"}])
    assert [c for c, _, _ in check(bad)] == ["GP840"]
    ok = nodepool(requirements=[{"key": "karpenter.sh.example.com/x", "operator": "Exists"}])
    assert check(ok) == []
    # int("two") fails to evaluate: the API server rejects the object too
    err = nodepool(requirements=[{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt",
                                  "values": ["two"]}])
    [(code, path, msg)] = check(err)
    assert code == "GP841" and path == ("spec", "template", "spec", "requirements") and "evaluate" in msg
    neg = nodepool(requirements=[{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["-1"]}])
    assert [c for c, _, _ in check(neg)] == ["GP840"]


def test_split_and_alias_rules():
    nc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "n"},
          "spec": {"role": "r", "amiSelectorTerms": [{"alias": "windows2022@v1"}],
                   "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}}
    msgs = [m for _, _, m in check(nc)]
    assert any("windows" in m.lower() for m in msgs), msgs  # split('@')[1] == 'latest' for windows families
    nc["spec"]["amiSelectorTerms"] = [{"alias": "al2023@v20260714"}]
    assert check(nc) == []


def test_defaults_are_applied_before_schema_and_rules():
    """The API server defaults an object before it validates it."""
    np_ = nodepool()
    # the default is on `disruption` as a whole ({consolidateAfter: 0s}): a disruption
    # without consolidateAfter is not defaulted field by field, and is rejected
    np_["spec"]["disruption"] = {"budgets": [{"nodes": "1"}]}
    assert [c for c, _, _ in check(np_)] == ["GP835"]
    np_["spec"]["disruption"] = {"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "@daily"}]}
    assert [m for _, _, m in check(np_)] == ["'schedule' must be set with 'duration'"]
    # Kueue: preference needs both whenCan* = TryNextFlavor; whenCanBorrow defaults to
    # MayStopSearch, so the rule is false (GP840), not an evaluation error on a missing field
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
          "spec": {"flavorFungibility": {"preference": "BorrowingOverPreemption"}}}
    assert [(c, p) for c, p, _ in check(cq)] == [("GP840", ("spec", "flavorFungibility"))]
    cq["spec"]["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"
    assert check(cq) == []  # whenCanPreempt defaults to TryNextFlavor


def test_schema_errors_come_first_and_point_at_the_unknown_key(tmp_path):
    write(tmp_path, "np.yaml", NODEPOOL.replace("      requirements:", "      kubelet: {maxPods: 1}\n      requirements:"))
    r = verify_paths([str(tmp_path)])
    [d] = [d for d in r.diagnostics if d.is_error]
    assert (d.code, d.line, d.col) == ("GP835", 14, 7)
    assert "unknown field spec.template.spec.kubelet" in d.message


def test_core_kinds_through_kubernetes_validate(tmp_path):
    write(tmp_path, "core.yaml", """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: "1000"
preemptionPolicy: Never
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q, namespace: a}
spec:
  hard: {requests.nvidia.com/gpu: "4"}
  scopeSelector: {matchExpression: []}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  validations:
    - expression: "object.spec.replicas < 5"
""")
    r = verify_paths([str(tmp_path)], Options(kubernetes_version="1.33"))
    errors = {(d.code, d.line) for d in r.diagnostics if d.is_error}
    # value is an integer; matchExpressions (typo); the policy has no matchConstraints,
    # which the Go validation requires (ValidateValidatingAdmissionPolicy)
    assert errors == {("GP836", 4), ("GP836", 12), ("GP846", 18)}
    assert r.stats.core_objects == 3


def test_reading_problems(tmp_path):
    write(tmp_path, "dup.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n")
    write(tmp_path, "broken.yaml", "apiVersion: v1\nkind: [\n")
    write(tmp_path, "list.yaml", "- apiVersion: v1\n")
    write(tmp_path, "other.yaml", "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: c}\n")
    write(tmp_path, "old.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: c}\n")
    r = verify_paths([str(tmp_path)])
    got = {(Path(d.file).name, d.code, d.line) for d in r.diagnostics}
    assert ("dup.yaml", "GP831", 5) in got
    assert any(f == "broken.yaml" and c == "GP830" for f, c, _ in got)
    assert ("list.yaml", "GP832", 1) in got
    assert ("other.yaml", "GP834", 2) in got
    assert ("old.yaml", "GP833", 1) in got
    assert not r.ok


def test_yaml_11_booleans_are_booleans_as_kubectl_reads_them(tmp_path):
    """`prune: yes` is a boolean to sigs.k8s.io/yaml: valid; `prune: "yes"` is a string: invalid."""
    app = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: a, namespace: argocd}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc"}
  syncPolicy: {automated: {prune: PRUNE}}
"""
    write(tmp_path, "a/app.yaml", app.replace("PRUNE", "yes"))
    write(tmp_path, "b/app.yaml", app.replace("PRUNE", '"yes"'))
    assert verify_paths([str(tmp_path / "a")]).ok
    assert [d.code for d in verify_paths([str(tmp_path / "b")]).diagnostics] == ["GP835"]


def test_transition_rules_run_against_a_base_tree(tmp_path):
    write(tmp_path, "old/np.yaml", NODEPOOL.replace("karpenter.sh/foo", "example.com/foo"))
    write(tmp_path, "new/np.yaml", NODEPOOL.replace("karpenter.sh/foo", "example.com/foo")
          .replace("group: karpenter.k8s.aws", "group: example.com"))
    alone = verify_paths([str(tmp_path / "new")])
    assert alone.ok
    assert [d.code for d in alone.diagnostics] == ["GP842"] * 3  # listed, not silently skipped
    r = verify_paths([str(tmp_path / "new")], base=[str(tmp_path / "old")])
    [d] = [d for d in r.diagnostics if d.is_error]
    assert d.code == "GP840" and d.message == "NodePool gpu: nodeClassRef.group is immutable"
    assert not [d for d in r.diagnostics if d.code == "GP842"]


def test_cel_coverage_command():
    r = run_gpuplan("verify", "--cel-coverage")
    assert r.returncode == 0, r.stdout + r.stderr
    from gpuplan.upstream.pins import ROOT

    total = sum(len(json.loads(p.read_text())) for p in (ROOT / "cel").glob("*.cel.json"))
    assert f"CEL coverage: {total}/{total} rules of the pinned CRDs evaluated (100%)" in r.stdout
    assert "karpenter.sh/v1 NodePool" in r.stdout and "left out" not in r.stdout


# --- every tree gpuplan ships -----------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(p.name for p in (REPO / "tests" / "golden").iterdir() if p.is_dir()))
def test_golden_trees_verify(tree):
    import yaml

    spec = yaml.safe_load((REPO / "examples" / f"{tree}.yaml").read_text())  # the example the tree is built from
    version = spec["spec"]["cluster"]["kubernetesVersion"]
    r = verify_paths([str(REPO / "tests" / "golden" / tree)], Options(kubernetes_version=version))
    assert r.ok and not [d for d in r.diagnostics if d.severity.value == "warning"], r.diagnostics
    assert r.stats.objects > 10 and r.stats.not_verified == 0


def test_committed_generated_tree_verifies():
    r = run_gpuplan("verify", "--strict", "generated")
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("spec", sorted((REPO / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_builds_through_verify(spec, tmp_path):
    """`gpuplan build` verifies each example's tree and writes it; the written tree verifies."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    r = run_gpuplan("build", f"examples/{spec.name}", "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = verify_paths([str(tmp_path / "out")])
    assert v.ok, [str(d) for d in v.diagnostics if d.is_error]


def test_a_rule_outside_the_implemented_library_is_listed_not_skipped():
    """Kubernetes' quantity library is not implemented for CRD rules (no pinned rule calls it;
    gpuplan's admission policies alone read ``quantity()`` through ``asApproximateFloat()``):
    a rule that does is reported as not evaluated, with the reason."""
    from gpuplan.verify import cel

    schema = {"type": "object", "properties": {"q": {"type": "string"}},
              "x-kubernetes-validations": [{"rule": "quantity(self.q).isGreaterThan(quantity('1'))", "message": "m"},
                                           {"rule": "self.q != ''", "message": "q", "messageExpression": "'q'"}]}
    tree = cel._tree(schema, "example.com/v1 X", "$")
    a, b = cel.all_rules(tree)
    assert not a.runnable and "quantity" in cel._why_not(a)
    assert not b.runnable and "messageExpression" in cel._why_not(b)
    found = list(cel.evaluate(tree, {"q": "2"}))
    assert [f.skipped is not None for f in found] == [True, True]
    assert "quantity" in found[0].skipped


REFUSED = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {repoURL: "https://git.example.com/t.git"}
    aws: {clusterName: t, nodeRole: KarpenterNodeRole-t, subnetTags: {team: ""}}
  pools:
    - name: burst
      gpu: H100-SXM5-80GB
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714}
      labels: {LABEL: ml}
"""


def test_build_refuses_a_tree_the_api_server_would_reject(tmp_path, monkeypatch, capsys):
    """gpuplan's own rules refuse every spec value known to break a CRD rule (GP621, GP626),
    so a refused tree means lowering itself went wrong: here a NodePool label in a
    restricted domain and an empty EC2NodeClass tag value are injected after the rules
    ran. Build verifies what it would write: exit 7, each problem named at the line of
    the file it would have written, nothing written, the old tree left as it was."""
    import gpuplan.lower.karpenter as karpenter
    import gpuplan.lower.karpenter_aws as karpenter_aws
    from gpuplan.cli.main import main

    monkeypatch.chdir(tmp_path)
    write(tmp_path, "fleet.yaml", REFUSED.replace("LABEL", "example.com/team").replace('{team: ""}', "{team: ml}"))
    with pytest.raises(SystemExit) as ok:
        main(["build", "fleet.yaml"])
    assert ok.value.code == 0, capsys.readouterr().err
    before = {p: p.read_bytes() for p in (tmp_path / "generated").rglob("*") if p.is_file()}
    capsys.readouterr()

    real_nodepool, real_nodeclass = karpenter.nodepool, karpenter_aws.ec2nodeclass

    def bad_nodepool(rf, pv):
        obj = real_nodepool(rf, pv)
        obj["spec"]["template"]["metadata"]["labels"]["karpenter.sh/team"] = "ml"
        return obj

    def bad_nodeclass(rf, pv):
        obj = real_nodeclass(rf, pv)
        obj["spec"]["subnetSelectorTerms"] = [{"tags": {"team": ""}}]
        return obj

    monkeypatch.setattr(karpenter, "nodepool", bad_nodepool)
    monkeypatch.setattr(karpenter_aws, "ec2nodeclass", bad_nodeclass)
    with pytest.raises(SystemExit) as refused:
        main(["build", "fleet.yaml"])
    err = capsys.readouterr().err
    assert refused.value.code == 7, err
    assert 'error[GP840]: NodePool burst: label domain "karpenter.sh" is restricted' in err
    assert "error[GP840]: EC2NodeClass burst: empty tag keys or values aren't supported" in err
    assert "error[GP850]: generated: not written: 2 problems the API server would reject" in err
    # the excerpt is the refused file's line, not the one on disk
    assert re.search(r"\n\d+ \|         karpenter\.sh/team: ml\n", err), err
    assert "Traceback" not in err
    after = {p: p.read_bytes() for p in (tmp_path / "generated").rglob("*") if p.is_file()}
    assert after == before
    assert not (tmp_path / ".generated.gpuplan-new").exists()  # the files streamed there are gone
    with pytest.raises(SystemExit) as as_json:
        main(["build", "--format", "json", "fleet.yaml"])
    assert as_json.value.code == 7 and "GP850" in capsys.readouterr().out


def test_the_rules_refuse_those_values_before_build_runs_verify(tmp_path):
    """The same two values written in the spec stop at the spec line (exit 1), before any output."""
    write(tmp_path, "fleet.yaml", REFUSED.replace("LABEL", "karpenter.sh/team"))
    r = run_gpuplan("build", "fleet.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "error[GP621]" in r.stderr and "error[GP626]" in r.stderr
    assert not (tmp_path / "generated").exists()


def test_hostile_files_end_in_a_diagnostic(tmp_path):
    """Nesting, alias bombs and kinds that look like paths: a clear error, bounded work."""
    write(tmp_path, "deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    write(tmp_path, "bomb.yaml", "\n".join(bomb + ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: x}"]) + "\n")
    write(tmp_path, "path.yaml", "apiVersion: karpenter.sh/v1\nkind: ../../../sources\nmetadata: {name: x, namespace: 7}\n"
                                 "---\napiVersion: v1\nkind: ../_definitions\nmetadata: {name: y}\n")
    r = run_gpuplan("verify", ".", cwd=tmp_path, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr
    # gpuplan's builder (100 levels) or libyaml's own limit (1,000) may stop it: either way GP830 at line 1
    assert re.search(r"deep\.yaml:1:\d+: error\[GP830\]", r.stderr), r.stderr
    assert "bomb.yaml:7:5: error[GP830]: aliases expand to more than 2,000,000 values" in r.stderr
    assert "path.yaml:1:13: error[GP833]" in r.stderr and "path.yaml:6:7: warning[GP834]" in r.stderr


def test_quantities_read_as_the_api_server_reads_them():
    """``quantity(s).asApproximateFloat()`` (k8s.io/apiserver pkg/cel/library/quantity.go): the
    value of every suffix form; a string that is no quantity fails the evaluation, as it does on
    the API server (and ``failurePolicy: Fail`` then refuses the object)."""
    from gpuplan.verify import cel

    def value(q):
        return cel.run(cel.expression("quantity(q).asApproximateFloat()", policy=True), {"q": q}, policy=True)
    assert [value(q) for q in ("1500m", "2", "2Gi", "1e3", "0.5", "1k")] == [1.5, 2.0, 2 ** 31, 1000.0, 0.5, 1000.0]
    for bad in ("1.5 cores", "", "Gi"):
        with pytest.raises(Exception):
            value(bad)
    assert cel.run(cel.expression("[quantity('500m'), quantity('1')].map(q, q.asApproximateFloat()).sum()",
                                  policy=True), {}, policy=True) == 1.5
    # outside the policies (CRD rules, DRA selectors) the library is not there
    with pytest.raises(ValueError):
        cel.expression("quantity('1').asApproximateFloat() > 0.5")
