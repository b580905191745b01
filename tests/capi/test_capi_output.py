"""The Cluster API objects of examples/onprem-capi.yaml (docs/capi.md).

Upstream behaviour modelled: kubernetes/autoscaler@cluster-autoscaler-1.36.1
cluster-autoscaler/cloudprovider/clusterapi/ (the annotations it reads and how:
clusterapi_utils.go:35-47, clusterapi_unstructured.go:203-338), kubernetes-sigs/cluster-api@v1.14.0
(the MachineDeployment webhook defaults replicas from the min-size annotation,
core/webhooks/admission/machinedeployment.go:360-388; only some Machine labels reach Nodes,
util/labels/helpers.go:79-107)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from tests.outputkit import compile_ok, docs
from tests.rules.helpers import edit

from gpuplan.identity import template_node_labels, template_taints
from gpuplan.provisioning import capi

EXAMPLE = Path(__file__).parents[2] / "examples" / "onprem-capi.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("capi")
    p = d / "fleet.yaml"
    p.write_text(EXAMPLE.read_text(), encoding="utf-8")
    return compile_ok(p)


def _pool(c, pool):
    kct, md = docs(c.files[f"provisioning/capi/{pool}.yaml"])
    assert (kct["kind"], md["kind"]) == ("KubeadmConfigTemplate", "MachineDeployment")
    return kct, md


def _args(kct):
    reg = kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]
    return {a["name"]: a["value"] for a in reg["kubeletExtraArgs"]}, reg.get("taints", [])


def test_not_part_of_the_workload_clusters_tree(built):
    root = docs(built.files["kustomization.yaml"])[0]
    assert not [r for r in root["resources"] if r.startswith("provisioning")]
    own = docs(built.files["provisioning/capi/kustomization.yaml"])[0]
    assert own["resources"] == ["train-h100.yaml", "infer-a100.yaml", "notebooks-l40s.yaml"]  # spec order


def test_an_autoscaled_pool_leaves_replicas_to_the_autoscaler(built):
    _, md = _pool(built, "train-h100")
    a = md["metadata"]["annotations"]
    assert "replicas" not in md["spec"]  # the webhook defaults it from min-size on create
    assert a["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"] == "0"
    assert a["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"] == "4"  # 32 GPUs / 8
    # the gpu-type value is the resource name of the template node (clusterapi_unstructured.go:335-337)
    assert a["capacity.cluster-autoscaler.kubernetes.io/gpu-type"] == "nvidia.com/gpu"
    assert a["capacity.cluster-autoscaler.kubernetes.io/gpu-count"] == "8"  # physical GPUs, exclusive
    assert (a["capacity.cluster-autoscaler.kubernetes.io/cpu"], a["capacity.cluster-autoscaler.kubernetes.io/memory"]) \
        == ("224", "2Ti")
    # per node group option (clusterapi_nodegroup.go:474-476): bare metal takes longer than the 15m default
    assert a["cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime"] == "45m"


def test_gpu_count_is_what_one_node_advertises(built):
    """The template node is what the autoscaler packs pending pods onto: a time-shared L40S node
    advertises 4 GPUs x 4 replicas."""
    _, md = _pool(built, "notebooks-l40s")
    assert md["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/gpu-count"] == "16"
    pv = built.resolved.pool_by_name["notebooks-l40s"]
    assert pv.node_resources() == {"nvidia.com/gpu": 16}


def test_the_template_node_carries_the_nodes_labels_and_taints(built):
    """labels/taints annotations "k=v,..." and "k=v:Effect,..." (clusterapi_unstructured.go:213-224,
    658-700): the simulated node must be selected and tolerated like the real one."""
    rf = built.resolved
    for pool in ("train-h100", "notebooks-l40s"):
        kct, md = _pool(built, pool)
        a = md["metadata"]["annotations"]
        args, taints = _args(kct)
        assert a["capacity.cluster-autoscaler.kubernetes.io/labels"] == args["node-labels"]
        labels = capi.parse_label_list(args["node-labels"])
        pv = rf.pool_by_name[pool]
        assert labels == {**template_node_labels(rf, pv), "cluster-api/accelerator": capi.accelerator(pv.pool)}
        assert labels["gpuplan.dev/pool"] == pool
        assert taints == template_taints(pv)
        parsed = [t.rsplit(":", 1) for t in a["capacity.cluster-autoscaler.kubernetes.io/taints"].split(",")]
        assert [(kv.split("=")[0], eff) for kv, eff in parsed] == [(t["key"], t["effect"]) for t in taints]
        assert ("gpuplan.dev/pool", "NoSchedule") in [(t["key"], t["effect"]) for t in taints]


def test_a_fixed_size_mig_pool_is_not_an_autoscaler_node_group(built):
    """README.md:192-193: the autoscaler manages only resources with both size annotations; and a
    labelled node with only MIG resources would count unready (gpu_processor.go:41-70)."""
    kct, md = _pool(built, "infer-a100")
    assert md["spec"]["replicas"] == 3
    assert not [k for k in md["metadata"].get("annotations", {})
                if k.startswith(("cluster.x-k8s.io/cluster-api-autoscaler", "capacity.cluster-autoscaler"))]
    args, taints = _args(kct)
    labels = capi.parse_label_list(args["node-labels"])
    assert "cluster-api/accelerator" not in labels
    assert labels["nvidia.com/mig.config"].startswith("gpuplan-infer-a100-")
    assert ("gpuplan.dev/mig-pool", "NoSchedule") in [(t["key"], t["effect"]) for t in taints]


def test_the_machine_deployment_references_its_bootstrap_and_the_users_infrastructure(built):
    kct, md = _pool(built, "train-h100")
    m = md["spec"]["template"]["spec"]
    assert m["bootstrap"]["configRef"] == {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate",
                                           "name": kct["metadata"]["name"]}
    assert m["infrastructureRef"] == {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                      "kind": "Metal3MachineTemplate", "name": "hgx-h100-v2"}
    assert m["version"] == "v1.33.4" and m["clusterName"] == md["spec"]["clusterName"] == "ml-onprem"
    assert md["spec"]["selector"]["matchLabels"].items() <= md["spec"]["template"]["metadata"]["labels"].items()
    assert kct["metadata"]["namespace"] == md["metadata"]["namespace"] == "ml-onprem"


def test_topology_settings_go_into_a_kubelet_drop_in(built):
    kct, _ = _pool(built, "train-h100")
    args, _ = _args(kct)
    [f] = kct["spec"]["template"]["spec"]["files"]
    assert args["config-dir"] == "/etc/kubernetes/kubelet.conf.d"
    assert f["path"].startswith(args["config-dir"] + "/") and f["path"].endswith(".conf")
    assert '"topologyManagerPolicy": "restricted"' in f["content"]
    assert args["provider-id"] == "metal3://{{ ds.meta_data.providerid }}"  # the spec's own flag, passed through
    notebooks, _ = _pool(built, "notebooks-l40s")
    assert "files" not in notebooks["spec"]["template"]["spec"] and "config-dir" not in _args(notebooks)[0]


def test_a_changed_label_renames_the_bootstrap_template(tmp_path, built):
    """Cluster API rolls machines only on a spec.template change; an edited template under the same
    name would reach no machine."""
    text = edit(EXAMPLE.read_text(), "        node.kubernetes.io/gpu-role: training\n",
                "        node.kubernetes.io/gpu-role: pretraining\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = compile_ok(p)
    old_kct, old_md = _pool(built, "train-h100")
    new_kct, new_md = _pool(c, "train-h100")
    assert new_kct["metadata"]["name"] != old_kct["metadata"]["name"]
    assert new_md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] == new_kct["metadata"]["name"]
    assert _pool(c, "notebooks-l40s") == _pool(built, "notebooks-l40s")


def test_the_placement_proof_reads_the_bootstrap_config_back(built):
    kct, _ = _pool(built, "infer-a100")
    pool, labels, taints = capi.read_template(kct)
    assert pool == "infer-a100" and labels["gpuplan.dev/pool"] == "infer-a100"
    assert taints == template_taints(built.resolved.pool_by_name["infer-a100"])


def _errors(obj: dict) -> list:
    from gpuplan.verify.verifier import Options, Verifier

    v = Verifier(Options(kubernetes_version="1.33"))
    v.add(obj, "obj.yaml", lambda p, k: (None, None), None)
    return [d for d in v.result().diagnostics if d.is_error]


def test_verify_checks_the_pinned_schemas(built):
    """The objects are checked against the strict v1beta2 schemas (gpuplan/upstream/SOURCES-capi.md)
    and their CEL rules."""
    kct, md = _pool(built, "train-h100")
    assert _errors(kct) == [] and _errors(md) == []
    bad = copy.deepcopy(md)
    bad["spec"]["template"]["spec"]["infrastructureRef"].pop("apiGroup")  # required in v1beta2
    assert _errors(bad)
    bad = copy.deepcopy(kct)
    args = bad["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    args.append({"name": args[0]["name"], "value": "other"})  # CEL: kubeletExtraArgs name must be unique
    assert _errors(bad)


def _node_from(kct: dict, pv, name: str) -> dict:
    """A Node as the kubelet registers it from the bootstrap config (labels, taints) once the
    device plugin advertises the pool's resources."""
    args, taints = _args(kct)
    res = {k: str(v) for k, v in pv.node_resources().items()}
    labels = capi.parse_label_list(args["node-labels"])
    if pv.pool.sharing.mode == "mig":
        labels["nvidia.com/mig.config.state"] = "success"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints}, "status": {"capacity": res, "allocatable": res}}


def test_verify_cluster_expects_what_the_bootstrap_config_registers(built):
    import json

    from gpuplan.compiler import planned_quotas
    from gpuplan.drift import parse_live, verify

    rf = built.resolved
    nodes = [_node_from(_pool(built, p)[0], rf.pool_by_name[p], f"{p}-md-0-x") for p in ("infer-a100", "train-h100")]

    def codes(items):
        live = parse_live([("live.json", json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": items}))])
        return sorted(d.code for d in verify(rf, live, planned_quotas(rf)).diagnostics if d.is_error)

    assert codes(nodes) == []
    stale = copy.deepcopy(nodes)
    stale[0]["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "infer-a100-00000000"  # an older template
    stale[1]["spec"]["taints"] = [t for t in stale[1]["spec"]["taints"] if t["key"] != "gpuplan.dev/pool"]
    assert codes(stale) == ["GP872", "GP873"]
    unlabelled = copy.deepcopy(nodes)
    del unlabelled[1]["metadata"]["labels"]["cluster-api/accelerator"]  # --gpu-total would not count it
    assert codes(unlabelled) == ["GP872"]


def test_which_changes_roll_the_machines(tmp_path, built):
    """mdutil/util.go:359-411 MachineTemplateUpToDate: version, bootstrap, infrastructureRef and
    failureDomain roll a MachineDeployment; its template's labels propagate in place."""
    text = edit(EXAMPLE.read_text(), "        node.kubernetes.io/gpu-role: training\n",
                "        node.kubernetes.io/gpu-role: pretraining\n")
    text = edit(text, "name: l40s-4u}", "name: l40s-4u-v2}")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = compile_ok(p)
    train = capi.machine_rollout(_pool(built, "train-h100")[1], _pool(c, "train-h100")[1])
    assert train is not None and train.startswith("bootstrap config")
    notebooks = capi.machine_rollout(_pool(built, "notebooks-l40s")[1], _pool(c, "notebooks-l40s")[1])
    assert notebooks is not None and notebooks.startswith("infrastructure template")
    assert capi.machine_rollout(_pool(built, "infer-a100")[1], _pool(c, "infer-a100")[1]) is None
    md = _pool(built, "infer-a100")[1]
    moved = copy.deepcopy(md)
    moved["spec"]["template"]["metadata"]["labels"]["team"] = "x"  # propagated in place
    assert capi.machine_rollout(md, moved) is None


def test_training_pods_keep_the_autoscaler_from_removing_their_node(built):
    """FAQ.md:115 / simulator/drainability/rules/notsafetoevict/rule.go:43: a pod annotated
    safe-to-evict "false" blocks the scale-down of its node."""
    from gpuplan.identity import CA_SAFE_TO_EVICT, pod_annotations

    rf = built.resolved
    tiers = {t.name: t for t in rf.fleet.spec.tiers}
    assert pod_annotations(rf, tiers["training"]) == {CA_SAFE_TO_EVICT: "false"}  # autoscaled H100 pool
    assert pod_annotations(rf, tiers["notebooks"]) == {}  # not a job
    assert pod_annotations(rf, tiers["inference-small"]) == {}
    assert f"{CA_SAFE_TO_EVICT}: 'false'" in built.files["tenants/vision/README.md"].decode()


def test_plan_base_lists_the_pools_whose_machines_roll(tmp_path, built):
    """`plan --base` (gpuplan.report.disruption) asks the back-end what a changed MachineDeployment
    does: a new bootstrap config or infrastructure template replaces every machine."""
    from gpuplan.report.disruption import by_pool, disruptions

    text = edit(EXAMPLE.read_text(), "        node.kubernetes.io/gpu-role: training\n",
                "        node.kubernetes.io/gpu-role: pretraining\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = compile_ok(p)
    ds = disruptions(built.files, c.files)
    found = [(d.severity, d.subject) for d in ds if "MachineDeployment" in d.subject]
    assert found == [("replace", "MachineDeployment gpuplan-train-h100 (pool train-h100)")]
    assert "pool train-h100: every node replaced (MachineDeployment)" in by_pool(ds)
    assert [d for d in disruptions(built.files, built.files) if "MachineDeployment" in d.subject] == []


def test_bare_metal_pools_roll_without_a_spare_host(tmp_path, built):
    """A Metal3 pool's MachineDeployment deletes an old machine before creating its replacement
    (``maxSurge: 0, maxUnavailable: 1``): Cluster API's default surge machine would wait for a free
    BareMetalHost that only the rollout could free. Another provider keeps Cluster API's default,
    and the verifier accepts the strategy against the pinned schema."""
    _, md = _pool(built, "train-h100")
    assert md["spec"]["rollout"] == {"strategy": {"type": "RollingUpdate",
                                                  "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}
    assert _errors(md) == []
    assert "maxSurge: 0" in built.files["provisioning/capi/README.md"].decode()
    text = EXAMPLE.read_text().replace("infrastructureRef: {kind: Metal3MachineTemplate, name: hgx-h100-v2}",
                                       "infrastructureRef: {kind: VSphereMachineTemplate, name: hgx-h100-v2}")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    _, other = _pool(compile_ok(p), "train-h100")
    assert "rollout" not in other["spec"]
    # the strategy rolls no machine: an existing pool gets it without a rollout
    old = copy.deepcopy(md)
    del old["spec"]["rollout"]
    assert capi.machine_rollout(old, md) is None
