"""Object-level diff of two rendered trees and its text / Markdown renderings."""

from __future__ import annotations

from gpuplan.output.objdiff import ObjectKey, diff_trees, render_markdown, render_text
from gpuplan.render.yamlwriter import dump, dump_documents_bytes


def quota(ns: str, hard: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": ns},
            "spec": {"hard": hard}}


def pc(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": "PreemptLowerPriority"}


def dp_config(replicas: int) -> dict:
    cfg = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp", "namespace": "gpu-operator"},
            "data": {"config.yaml": dump(cfg)}}


OLD = {
    "tenants/vision/quotas.yaml": dump_documents_bytes([quota("vision-train", {"requests.nvidia.com/gpu": "16",
                                                                               "limits.nvidia.com/gpu": "16"})]),
    "cluster/priorityclasses.yaml": dump_documents_bytes([pc("training", 100000), pc("legacy", 10)]),
    "gpu-operator/device-plugin-config.yaml": dump_documents_bytes([dp_config(4)]),
    "gpu-operator/values.yaml": dump({"driver": {"enabled": False}, "migManager": {"enabled": True}}).encode(),
    "README.md": b"# generated\n\nold text\n",
}
NEW = {
    "tenants/vision/quotas.yaml": dump_documents_bytes([quota("vision-train", {"requests.nvidia.com/gpu": "32"})]),
    "cluster/priorityclasses.yaml": dump_documents_bytes([pc("training", 100000), pc("notebooks", 1000)]),
    "gpu-operator/device-plugin-config.yaml": dump_documents_bytes([dp_config(8)]),
    "gpu-operator/values.yaml": dump({"driver": {"enabled": True}, "migManager": {"enabled": True},
                                      "toolkit": {"env": [{"name": "A", "value": "1"}]}}).encode(),
    "README.md": b"# generated\n\nnew text\nmore\n",
}


def test_added_removed_changed_objects_with_field_paths() -> None:
    d = diff_trees(OLD, NEW)
    assert [c.key.label for c in d.added] == ["PriorityClass.scheduling.k8s.io notebooks"]
    assert [c.key.label for c in d.removed] == ["PriorityClass.scheduling.k8s.io legacy"]
    assert d.unchanged == 1  # PriorityClass training
    changed = {c.key.label: c for c in d.changed}
    assert set(changed) == {
        "ResourceQuota vision-train/gpu-quota",
        "ConfigMap gpu-operator/dp",
        "gpu-operator/values.yaml",
        "README.md",
    }
    q = changed["ResourceQuota vision-train/gpu-quota"]
    assert q.file == "tenants/vision/quotas.yaml"
    assert [(f.path, f.kind) for f in q.fields] == [
        ('spec.hard["requests.nvidia.com/gpu"]', "changed"),
        ('spec.hard["limits.nvidia.com/gpu"]', "removed"),
    ]
    assert (q.fields[0].old, q.fields[0].new) == ("16", "32")
    cm = changed["ConfigMap gpu-operator/dp"]
    assert [f.path for f in cm.fields] == [
        'data["config.yaml"]|.sharing.timeSlicing.resources[name=nvidia.com/gpu].replicas'
    ]
    assert (cm.fields[0].old, cm.fields[0].new) == (4, 8)
    v = changed["gpu-operator/values.yaml"]
    assert [(f.path, f.kind) for f in v.fields] == [("driver.enabled", "changed"), ("toolkit", "added")]


def test_objects_are_matched_across_files_and_api_versions() -> None:
    old = {"a.yaml": dump_documents_bytes([{"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
                                            "metadata": {"name": "train"}, "spec": {"x": 1}}])}
    new = {"b.yaml": dump_documents_bytes([{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                            "metadata": {"name": "train"}, "spec": {"x": 1}}])}
    d = diff_trees(old, new)
    assert d.added == () and d.removed == ()
    [c] = d.changed
    assert c.key == ObjectKey("karpenter.sh", "NodePool", "", "train")
    assert c.file == "a.yaml → b.yaml"
    assert [(f.path, f.old, f.new) for f in c.fields] == [("apiVersion", "karpenter.sh/v1beta1", "karpenter.sh/v1")]


def test_identical_trees_have_no_changes() -> None:
    d = diff_trees(OLD, dict(OLD))
    assert d.empty and d.unchanged == 6
    assert render_text(d) == "0 added, 0 removed, 0 changed (6 unchanged)\n"
    assert "No object changes." in render_markdown(d)


def test_type_changes_are_changes() -> None:
    old = {"v.yaml": dump({"a": 1, "b": "1"}).encode()}
    new = {"v.yaml": dump({"a": True, "b": 1}).encode()}
    [c] = diff_trees(old, new).changed
    assert [f.path for f in c.fields] == ["a", "b"]


def test_render_text() -> None:
    text = render_text(diff_trees(OLD, NEW))
    assert text.splitlines()[0] == "1 added, 1 removed, 4 changed (1 unchanged)"
    assert "+ PriorityClass.scheduling.k8s.io notebooks  (cluster/priorityclasses.yaml)\n" in text
    assert "- PriorityClass.scheduling.k8s.io legacy  (cluster/priorityclasses.yaml)\n" in text
    assert '    spec.hard["requests.nvidia.com/gpu"]: "16" → "32"\n' in text
    assert '    spec.hard["limits.nvidia.com/gpu"]: - "16"\n' in text
    assert "    (content): 3 lines → 4 lines (+2 -1)\n" in text
    assert render_text(diff_trees(OLD, NEW)) == text


def test_render_markdown() -> None:
    md = render_markdown(diff_trees(OLD, NEW), details_over=1)
    assert md.startswith("**gpuplan diff**: 1 added, 1 removed, 4 changed (1 unchanged)\n")
    assert "#### Added (1)\n\n| Kind | Namespace | Name | File |\n|---|---|---|---|\n" in md
    assert "| PriorityClass.scheduling.k8s.io |  | `notebooks` | `cluster/priorityclasses.yaml` |" in md
    assert "#### Removed (1)" in md and "#### Changed (4)" in md
    assert "| ResourceQuota | `vision-train` | `gpu-quota` | `tenants/vision/quotas.yaml` | 2 |" in md
    assert "<details>\n<summary>ResourceQuota vision-train/gpu-quota: 2 changed fields</summary>\n\n" in md
    assert '- `spec.hard["requests.nvidia.com/gpu"]: "16" → "32"`' in md
    assert md.count("<details>") == md.count("</details>") == 2  # values.yaml and the quota
    short = render_markdown(diff_trees(OLD, NEW))
    assert "<details>" not in short


def test_markdown_escapes_pipes_and_backticks_in_cells() -> None:
    new = {"n.yaml": dump_documents_bytes([{"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "a|b`c"}}])}
    md = render_markdown(diff_trees({}, new))
    assert "| Namespace |  | ``a\\|b`c`` | `n.yaml` |" in md


def test_markdown_stays_below_the_comment_limit() -> None:
    many = {f"ns{i}.yaml": dump_documents_bytes([{"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": f"team-{i:05d}"}}]) for i in range(3000)}
    md = render_markdown(diff_trees({}, many), max_chars=20_000)
    assert len(md) < 20_000
    assert "more entries not shown" in md


def test_long_values_are_truncated() -> None:
    old = {"v.yaml": dump({"a": "x" * 500}).encode()}
    new = {"v.yaml": dump({"a": "y" * 500}).encode()}
    line = render_text(diff_trees(old, new)).splitlines()[2]
    assert line.startswith('    a: "xxx') and "…" in line and len(line) < 200


# --- #27: lists matched by natural key, long strings shown where they changed -------------


def _rules(alerts: list[tuple[str, str]]) -> dict:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "gpuplan", "namespace": "monitoring"},
            "spec": {"groups": [{"name": "gpuplan.gpu", "rules": [
                {"alert": a, "expr": e, "for": "5m"} for a, e in alerts] + [
                {"record": "gpuplan:gpu_used:sum", "expr": "sum(DCGM_FI_DEV_GPU_UTIL)"}]}]}}


ALERTS = [(f"GPUAlert{i:02d}", f"avg by (node) (DCGM_FI_DEV_GPU_TEMP{{pool=\"p{i}\"}}) > {80 + i}")
          for i in range(40)]


def _tree(doc: dict) -> dict[str, bytes]:
    return {"monitoring/rules.yaml": dump_documents_bytes([doc])}


def test_one_alert_added_is_one_addition_not_forty_renames():
    new = ALERTS[:3] + [("GPUNew", "up == 0")] + ALERTS[3:]
    d = diff_trees(_tree(_rules(ALERTS)), _tree(_rules(new)))
    [c] = d.changed
    assert [(f.path, f.kind) for f in c.fields] == [
        ('spec.groups[name=gpuplan.gpu].rules[alert=GPUNew]', "added")]


def test_rules_without_unique_names_are_aligned_by_content():
    old = [{"expr": f"a{i}"} for i in range(10)]
    new = old[:2] + [{"expr": "inserted"}] + old[2:]
    doc = lambda rules: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "spec": {"r": rules}}
    [c] = diff_trees(_tree(doc(old)), _tree(doc(new))).changed
    assert [(f.path, f.kind) for f in c.fields] == [("spec.r[2]", "added")]


def test_tolerations_by_key_and_containers_by_name():
    def ds(tols, containers):
        return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "namespace": "n"},
                "spec": {"tolerations": tols, "containers": containers}}
    t = [{"key": "a", "operator": "Exists", "effect": "NoSchedule"},
         {"key": "b", "operator": "Exists", "effect": "NoSchedule"}]
    c = [{"name": "one", "image": "i:1"}, {"name": "two", "image": "i:2"}]
    old = ds(t, c)
    new = ds([{"key": "z", "operator": "Exists", "effect": "NoSchedule"}] + t, [c[1], {**c[0], "image": "i:9"}])
    [ch] = diff_trees(_tree(old), _tree(new)).changed
    got = {(f.path, f.kind) for f in ch.fields}
    assert got == {("spec.tolerations[key=z]", "added"), ("spec.containers[name=one].image", "changed")}
    # one key with two effects: matched by key and effect
    two = [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]
    [ch] = diff_trees(_tree(ds(two, c)), _tree(ds(two[1:], c))).changed
    assert [(f.path, f.kind) for f in ch.fields] == [("spec.tolerations[key=a,effect=NoSchedule]", "removed")]


def test_a_long_expression_shows_the_part_that_changed():
    expr = "sum by (namespace) (kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"}) / " \
           "sum(kube_resourcequota{type=\"hard\",resource=\"requests.nvidia.com/gpu\"}) > 0.9"
    new = [(ALERTS[0][0], expr), *ALERTS[1:]]
    old = [(ALERTS[0][0], expr.replace("> 0.9", "> 0.8")), *ALERTS[1:]]
    text = render_text(diff_trees(_tree(_rules(old)), _tree(_rules(new))))
    [line] = [ln for ln in text.splitlines() if ".expr:" in ln]
    before, after = line.split(": ", 1)[1].split(" → ")
    assert before != after  # a cut at a fixed width would show the same start on both sides
    assert "0.8" in before and "0.9" in after
    md = render_markdown(diff_trees(_tree(_rules(old)), _tree(_rules(new))))
    assert "0.8" in md and "0.9" in md
