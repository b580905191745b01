"""Volcano v1.15.1 as gpuplan pins it: the Queue, PodGroup and Job schemas `refresh_volcano`
writes, what `gpuplan verify` does with them, the chart's object list and the CRDs the test
control plane builds from the pinned schemas. Nothing here reads an upstream checkout: the
refresh is run against a repository made in the test."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.conftest import REPO, replaced

from gpuplan.upstream import pins, refresh_charts, refresh_volcano
from gpuplan.verify.verifier import verify_paths

COMMIT = "0a56ed331897f5455916a44d3075671376d731d6"  # git rev-parse v1.15.1^{commit}
KINDS = {("scheduling.volcano.sh", "Queue", "v1beta1"), ("scheduling.volcano.sh", "PodGroup", "v1beta1"),
         ("batch.volcano.sh", "Job", "v1alpha1")}

QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "team-a"},
         "spec": {"capability": {"nvidia.com/gpu": "16", "cpu": "256", "memory": "2Ti"},
                  "deserved": {"nvidia.com/gpu": 8}, "guarantee": {"resource": {"nvidia.com/gpu": "4"}},
                  "parent": "root", "reclaimable": True, "weight": 2}}
PODGROUP = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 4, "queue": "team-a", "priorityClassName": "gpu-high"}}
JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
       "spec": {"schedulerName": "volcano", "queue": "team-a", "minAvailable": 2,
                "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "w", "image": "trainer:1",
                                    "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}]}}


def _sources() -> dict[tuple[str, str, str], dict]:
    out = {}
    for e in pins.sources()["crds"]:
        group, _, version = e["apiVersion"].rpartition("/")
        out[(group, e["kind"], version)] = e
    return out


def test_every_volcano_kind_is_pinned_with_its_source():
    src = _sources()
    for key in KINDS:
        e = src[key]
        assert (e["repository"], e["tag"], e["commit"]) == ("volcano-sh/volcano", "v1.15.1", COMMIT), e
        assert e["path"].startswith("installer/helm/chart/volcano/crd/bases/"), e
        assert "refresh_volcano" in e["transform"] and not e.get("deprecated"), e
        assert (pins.ROOT / e["schema"]).is_file() and json.loads((pins.ROOT / e["cel"]).read_text()) == []
        # the one version each CRD serves at the tag
        assert pins.served_versions(key[0], key[1]) == [key[2]]
    text = (pins.ROOT / "SOURCES-volcano.md").read_text(encoding="utf-8")
    assert "Storage versions: Queue v1beta1, PodGroup v1beta1, Job v1alpha1." in text


def test_the_pinned_queue_says_what_upstream_says():
    """The facts of the v1.15.1 Queue CRD gpuplan's Queues are written against."""
    spec = pins.crd_schema("scheduling.volcano.sh", "Queue", "v1beta1")["properties"]["spec"]
    p = spec["properties"]
    assert p["weight"] == {"default": 1, "format": "int32", "maximum": 65535, "minimum": 1, "type": "integer"}
    assert p["parent"]["pattern"] == r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    assert p["parent"]["maxLength"] == 253 and "default" not in p["parent"]
    assert p["reclaimable"] == {"type": "boolean"}
    assert p["dequeueStrategy"] == {"default": "traverse", "enum": ["fifo", "traverse"], "type": "string"}
    for field in ("capability", "deserved"):
        assert p[field]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert set(p["guarantee"]["properties"]) == {"resource"}
    assert "required" not in spec
    pg = pins.crd_schema("scheduling.volcano.sh", "PodGroup", "v1beta1")["properties"]["spec"]["properties"]
    assert pg["queue"]["default"] == "default" and pg["minMember"]["minimum"] == 0


def _fake_upstream(tmp_path: Path, change=None) -> Path:
    """A bare volcano-sh/volcano repository tagged v1.15.1 whose CRDs carry the pinned schemas (a
    fixed point of the strict conversion), optionally changed by ``change(kind, schema)``."""
    repo = tmp_path / "volcano"
    names = {"Queue": ("queues", "Cluster"), "PodGroup": ("podgroups", "Namespaced"), "Job": ("jobs", "Namespaced")}
    for group, kind, path in refresh_volcano.CRDS:
        [version] = [v for g, k, v in KINDS if (g, k) == (group, kind)]
        schema = copy.deepcopy(pins.crd_schema(group, kind, version))
        if change:
            change(kind, schema)
        plural, scope = names[kind]
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.{group}"},
               "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                        "versions": [{"name": version, "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": schema}}]}}
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(yaml.safe_dump(crd), encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "crds"], check=True)
    subprocess.run([*git, "tag", "v1.15.1"], check=True)
    # a bare clone, as the mirror is: a work tree would be read as the Go module cache's copy
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(tmp_path / "volcano.git")], check=True)
    return tmp_path / "volcano.git"


def test_refresh_writes_the_shipped_schemas_and_rules(tmp_path):
    repo = _fake_upstream(tmp_path)
    files = refresh_volcano.plan(repo)
    shipped = {p: p.read_text(encoding="utf-8") for p in files if p != refresh_volcano.SOURCES}
    assert len(shipped) == 6  # three schemas, three CEL lists
    assert {p: files[p] for p in shipped} == shipped
    # the table names the commit of the tag read, and nothing else differs
    fake = subprocess.run(["git", "-C", str(repo), "rev-parse", "v1.15.1^{commit}"], check=True,
                          capture_output=True, text=True).stdout.strip()
    table = files[refresh_volcano.SOURCES]
    assert table.count(fake) == 3 and COMMIT not in table
    assert table.replace(fake, COMMIT) == refresh_volcano.SOURCES.read_text(encoding="utf-8")


def test_check_reports_a_schema_upstream_changed(tmp_path, capsys):
    def looser(kind, schema):
        if kind == "Queue":
            schema["properties"]["spec"]["properties"]["weight"]["minimum"] = 0

    assert refresh_volcano.main(["--check", str(_fake_upstream(tmp_path, looser))]) == 1
    stale = set(capsys.readouterr().out.split())
    assert "crds/scheduling.volcano.sh/queue_v1beta1.json" in stale
    assert "crds/batch.volcano.sh/job_v1alpha1.json" not in stale


# --- gpuplan verify ------------------------------------------------------------------------------


def _verify(tmp_path: Path, *objs: dict):
    (tmp_path / "volcano.yaml").write_text(yaml.safe_dump_all(objs), encoding="utf-8")
    return verify_paths([str(tmp_path)])


def test_verify_accepts_valid_volcano_objects(tmp_path):
    r = _verify(tmp_path, QUEUE, PODGROUP, JOB)
    assert r.ok and not r.diagnostics, r.diagnostics
    assert (r.stats.crd_objects, r.stats.not_verified) == (3, 0)


@pytest.mark.parametrize("obj,path,value,where", [
    (QUEUE, ("spec", "weight"), 0, "spec.weight"),  # minimum 1
    (QUEUE, ("spec", "weight"), 65536, "spec.weight"),  # maximum 65535
    (QUEUE, ("spec", "parent"), "Research", "spec.parent"),  # a queue name with capitals
    (QUEUE, ("spec", "deserved"), {"nvidia.com/gpu": "eight"}, 'spec.deserved["nvidia.com/gpu"]'),  # not a quantity
    (QUEUE, ("spec", "guarantee"), {"percentage": 50}, "spec.guarantee.percentage"),  # not a v1.15.1 field
    (PODGROUP, ("spec", "queue"), "Team-A", "spec.queue"),
    (PODGROUP, ("spec", "minMember"), -1, "spec.minMember"),
    (JOB, ("spec", "queue"), "Team-A", "spec.queue"),
    (JOB, ("spec", "minAvailable"), -1, "spec.minAvailable"),
    (JOB, ("spec", "tasks", 0, "name"), "Worker", "spec.tasks[0].name"),
    (JOB, ("spec", "tasks", 0, "template", "spec", "containers", 0, "gpus"), 8,
     "spec.tasks[0].template.spec.containers[0].gpus"),  # the pod template is schema-checked too
], ids=lambda x: x if isinstance(x, str) else None)
def test_verify_rejects_a_bad_volcano_object(tmp_path, obj, path, value, where):
    r = _verify(tmp_path, replaced(obj, path, value))
    assert not r.ok
    assert [(d.code, d.path) for d in r.diagnostics if d.is_error] == [("GP835", where)]


def test_queue_status_is_a_subresource_and_podgroup_status_is_not(tmp_path):
    """Queue (and Job) declare a status subresource, so create and update ignore `status`;
    PodGroup declares `subresources: {}`, so its status is validated with the rest."""
    queue = {**QUEUE, "status": {"state": "Bogus"}}
    podgroup = {**PODGROUP, "status": {"phase": "Bogus"}}
    r = _verify(tmp_path, queue, podgroup)
    assert [(d.code, d.path) for d in r.diagnostics if d.is_error] == [("GP835", "status.phase")]


# --- the chart -----------------------------------------------------------------------------------


def test_the_chart_entry_and_its_pinned_objects():
    c = refresh_charts.CHARTS["volcano"]
    assert (c["repository"], c["tag"], c["version"], c["path"]) == (
        "volcano-sh/volcano", "v1.15.1", "1.15.1", "installer/helm/chart/volcano")
    from gpuplan.objchecks.charts import chart_objects, rendered

    data = chart_objects("volcano", "1.15.1")
    assert data is not None and data["commit"] == COMMIT
    crds = {o["template"] for o in data["objects"] if o["kind"] == "CustomResourceDefinition"}
    assert {"templates/scheduling_v1beta1_queue.yaml", "templates/scheduling_v1beta1_podgroup.yaml",
            "templates/batch_v1alpha1_job.yaml", "jobflow.templates/flow_v1alpha1_jobflows.yaml"} <= crds
    kinds = lambda values: {o["kind"] for o in rendered(data, values, "volcano-system")}  # noqa: E731
    # the admission policies render only with custom.vap_enable (false by default); the webhooks by default
    assert "ValidatingAdmissionPolicy" not in kinds({})
    assert "ValidatingAdmissionPolicy" in kinds({"custom": {"vap_enable": True}})
    assert "ValidatingWebhookConfiguration" in kinds({})


def test_a_template_that_brings_in_a_chart_file_is_read_as_that_file(tmp_path):
    repo = tmp_path / "chart"
    files = {
        "c/values.yaml": "enabled: false\n",
        "c/crd/bases/x.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n",
        "c/policy/p.yaml": "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n---\n"
                           "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n",
        "c/templates/crd.yaml": '{{- tpl ($.Files.Get (printf "crd/%s/x.yaml" (include "crd_version" .))) . }}',
        "c/templates/vap.yaml": '{{- if .Values.enabled }}\n{{ .Files.Get "policy/p.yaml" }}\n{{- end }}\n',
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    objects, _ = refresh_charts.read_chart(str(repo), "HEAD", "c")
    got = [(o["kind"], o["template"], o["when"]) for o in objects]
    assert got == [("CustomResourceDefinition", "templates/crd.yaml", []),
                   ("ValidatingAdmissionPolicy", "templates/vap.yaml", [["enabled", True]]),
                   ("ValidatingAdmissionPolicyBinding", "templates/vap.yaml", [["enabled", True]])]


# --- the test control plane ----------------------------------------------------------------------


def test_the_control_plane_builds_the_volcano_crds_from_the_pinned_schemas():
    sys.path.insert(0, str(REPO / "tests" / "cluster"))
    from crds import package_crds

    crds = {d["metadata"]["name"]: d["spec"] for d in package_crds()}
    queue, podgroup, job = (crds[n] for n in ("queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh",
                                              "jobs.batch.volcano.sh"))
    assert (queue["scope"], podgroup["scope"], job["scope"]) == ("Cluster", "Namespaced", "Namespaced")
    # as upstream: Queue and Job have a status subresource, PodGroup none
    assert [s["versions"][0]["subresources"] for s in (queue, podgroup, job)] == [{"status": {}}, {}, {"status": {}}]
    [v] = queue["versions"]
    assert v["name"] == "v1beta1" and v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["weight"][
        "minimum"] == 1
