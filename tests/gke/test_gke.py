"""GKE node pools (`pools[].gke`): the spine's predicates on a node-group pool, the generic
machine-table rules GP637-GP639, the GKE rules GP662-GP667, the Config Connector
ContainerNodePool, and the rest of gpuplan following the back-end (resources, contract pods,
quotas, placement proof, operator values, plan --base).

The GKE behaviour modelled (docs/gke.md lists the pages): every MIG partition and every
time-shared or MPS share is advertised as `nvidia.com/gpu`; a node pool has one
`gpuPartitionSize` and GKE creates as many partitions as fit; nodes carry
`cloud.google.com/gke-gpu-partition-size` and the sharing labels; Config Connector v1.155.1's
Terraform controller refuses changes to fields its CRD marks `Immutable.`
(pkg/controller/tf/controller.go:381-384)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules.helpers import Run, edit, position

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "gke.yaml").read_text(encoding="utf-8")

BASE = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: g}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops:
      repoURL: https://git.example.com/fleet.git
    gcp: {project: ml-platform-prod, location: us-central1, clusterName: ml}
  pools:
    - name: infer
      gpu: A100-SXM4-80GB
      gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}
      sharing: {mode: mig, layout: {3g.40gb: 2}}
    - name: train
      gpu: H100-SXM5-80GB
      gke: {machineType: a3-highgpu-8g, maxGPUs: 16}
    - name: dev
      gpu: L4
      gke: {machineType: g2-standard-8, maxGPUs: 4, spot: true}
      sharing: {mode: time-slicing, replicas: 4}
  tiers:
    - {name: serve, pool: infer, profile: 3g.40gb, workload: inference, priority: 5000, enforcePriority: true}
    - {name: training, pool: train, workload: training, priority: 1000, enforcePriority: true}
    - {name: notebooks, pool: dev, workload: interactive, priority: 10, preemption: Never, maxGPUsPerPod: 1,
       enforcePriority: true}
  tenants:
    - name: a
      namespaces: [a-ns]
      quotas:
        a-ns: {serve: 4, training: 8, notebooks: 4}
"""


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)


def _codes(diags, code):
    return [d for d in diags if d.code == code]


# --- the spine on a node-group pool -----------------------------------------------------------


def test_a_pool_takes_exactly_one_provisioning_field(run):
    """`nodes`, `karpenter`, `gke`, `aks`, `capi` are mutually exclusive; none is an error too."""
    two = edit(BASE, "      gke: {machineType: a3-highgpu-8g, maxGPUs: 16}\n",
               "      gke: {machineType: a3-highgpu-8g, maxGPUs: 16}\n      nodes: [n1]\n      gpusPerNode: 8\n")
    from gpuplan.compiler import check_fleet

    p = run.tmp_path / "two.yaml"
    p.write_text(two, encoding="utf-8")
    msgs = [d.message for d in check_fleet(p).diagnostics if d.is_error]
    assert any("exactly one of `nodes`" in m for m in msgs)
    rf = run.resolved(BASE)
    assert [pv.pool.provisioner for pv in rf.pools] == ["gke", "gke", "gke"]


def test_gpus_per_node_and_ceiling_come_from_the_machine_type(run):
    """a2-ultragpu-1g has one A100 80GB, a3-highgpu-8g eight H100s: maxGPUs in whole nodes."""
    from gpuplan.provisioning.pools import autoscaled, karpenter_pool, node_group_pool, static_nodes

    rf = run.resolved(BASE)
    infer, train, dev = rf.pools
    assert (infer.gpus_per_node, infer.node_count) == (1, 8)
    assert (train.gpus_per_node, train.node_count) == (8, 2)
    assert all(node_group_pool(pv.pool) and autoscaled(pv.pool) for pv in rf.pools)
    assert not any(static_nodes(pv.pool) or karpenter_pool(pv.pool) for pv in rf.pools)


def test_gke_partitions_and_shares_are_advertised_as_gpus(run):
    """GKE's device plugin: each 3g.40gb partition (2 per A100 80GB) and each of 4 shares is one
    nvidia.com/gpu; the tiers hand out nvidia.com/gpu, never nvidia.com/mig-* or .shared."""
    rf = run.resolved(BASE)
    infer, train, dev = rf.pools
    assert infer.node_resources() == {"nvidia.com/gpu": 2}
    assert dev.node_resources() == {"nvidia.com/gpu": 4}
    assert {t.name: rf.tier_resource(t) for t in rf.fleet.spec.tiers} == {
        "serve": "nvidia.com/gpu", "training": "nvidia.com/gpu", "notebooks": "nvidia.com/gpu"}
    from gpuplan.units import unit_gpu_fraction

    serve = rf.tier_by_name["serve"]
    assert unit_gpu_fraction(rf, serve) == 0.5  # 4 of 8 memory slices, not a whole GPU


def test_the_operator_path_keeps_the_device_plugins_resources(run):
    """`driver: gpu-operator`: GKE installs nothing, mig-manager and NVIDIA's device plugin
    advertise nvidia.com/mig-3g.40gb (mixed), and the pool gets the MIG gate like Karpenter's."""
    from gpuplan.identity import MIG_POOL_TAINT_KEY, pool_node_taints

    text = edit(BASE, "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}",
                "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8, driver: gpu-operator, imageType: UBUNTU_CONTAINERD}")
    rf = run.resolved(text)
    infer = rf.pools[0]
    assert infer.node_resources() == {"nvidia.com/mig-3g.40gb": 2}
    assert any(t["key"] == MIG_POOL_TAINT_KEY for t in pool_node_taints(infer))


def test_contract_pods_select_their_partition_size_and_sharing(run):
    """The tier's contract pod selects the GKE node label of its partition size (and the sharing
    labels), besides the pool label; the GPU taint GKE adds is tolerated."""
    from gpuplan.identity import contract_spec

    rf = run.resolved(BASE)
    serve = contract_spec(rf, rf.tier_by_name["serve"])
    assert serve["nodeSelector"] == {"gpuplan.dev/pool": "infer",
                                     "cloud.google.com/gke-gpu-partition-size": "3g.40gb"}
    # GKE's GPU taint, by key and effect (its value is GKE's)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in serve["tolerations"]
    nb = contract_spec(rf, rf.tier_by_name["notebooks"])
    assert nb["nodeSelector"]["cloud.google.com/gke-gpu-sharing-strategy"] == "time-sharing"
    assert nb["nodeSelector"]["cloud.google.com/gke-max-shared-clients-per-gpu"] == "4"


def test_spot_node_pool_is_preemptible_capacity(run):
    from gpuplan.units import pool_capacity_types, preemptible_pool

    rf = run.resolved(BASE)
    infer, train, dev = rf.pools
    assert pool_capacity_types(dev.pool) == ("spot",) and preemptible_pool(dev)
    assert pool_capacity_types(train.pool) == ("on-demand",) and not preemptible_pool(train)


# --- GP637-GP639: the machine table ---------------------------------------------------------


def test_gp637_unknown_machine_type(run):
    text = edit(BASE, "machineType: a3-highgpu-8g", "machineType: a3-highgpu-8gg")
    [d] = _codes(run(text), "GP637")
    assert (d.line, d.col) == position(text, "a3-highgpu-8gg") and "a3-highgpu-8g?" in d.hint


def test_gp638_machine_type_decides_the_gpu(run):
    text = edit(BASE, "gpu: H100-SXM5-80GB", "gpu: A100-SXM4-80GB")
    [d] = _codes(run(text), "GP638")
    assert "H100-SXM5-80GB" in d.message and (d.line, d.col) == position(text, "A100-SXM4-80GB\n      gke: {machineType: a3")


def test_gp639_gpus_per_node_must_match_the_machine_type(run):
    text = edit(BASE, "      gpu: H100-SXM5-80GB\n", "      gpu: H100-SXM5-80GB\n      gpusPerNode: 4\n")
    [d] = _codes(run(text), "GP639")
    assert "8 GPUs" in d.message


# --- GP662-GP667 ---------------------------------------------------------------------------


def test_gp662_needs_cluster_gcp_zones_in_region_and_taint_values(run):
    no_gcp = edit(BASE, "    gcp: {project: ml-platform-prod, location: us-central1, clusterName: ml}\n", "")
    assert len(_codes(run(no_gcp), "GP662")) == 3  # one per GKE pool
    zone = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, zones: [europe-west4-a]}")
    [d] = _codes(run(zone), "GP662")
    assert (d.line, d.col) == position(zone, "europe-west4-a")
    taint = edit(BASE, "      gpu: L4\n", "      gpu: L4\n      taints: [{key: dedicated, effect: NoSchedule}]\n")
    [d] = _codes(run(taint), "GP662")
    assert "needs one" in d.message
    assert _codes(run(BASE), "GP662") == []


def test_gp663_one_partition_size_per_gke_pool(run):
    """A mixed layout or a per-GPU layout cannot be a gpuPartitionSize: error, with the hint
    that points at the GPU Operator path (where mig-manager applies any layout)."""
    mixed = edit(BASE, "layout: {3g.40gb: 2}", "layout: {3g.40gb: 1, 1g.10gb: 3}")
    [d] = _codes(run(mixed), "GP663")
    assert "use the GPU Operator path on this pool" in d.hint
    operator = edit(mixed, "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}",
                    "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8, driver: gpu-operator, imageType: UBUNTU_CONTAINERD}")
    operator = edit(operator, "profile: 3g.40gb, workload", "profile: 1g.10gb, workload")
    assert _codes(run(operator), "GP663") == []


def test_gp664_partition_size_and_count_gke_creates(run):
    count = edit(BASE, "layout: {3g.40gb: 2}", "layout: {3g.40gb: 1}")
    [d] = _codes(run(count), "GP664")
    assert "makes 2 partitions" in d.message and d.hint == "set 3g.40gb: 2"
    # 4g.20gb is a valid A100 40GB profile (mig-parted could make it), but not a GKE partition size
    a100 = edit(BASE, "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}", "gke: {machineType: a2-highgpu-1g, maxGPUs: 8}")
    a100 = edit(a100, "layout: {3g.40gb: 2}", "layout: {4g.20gb: 1}").replace("profile: 3g.40gb", "profile: 4g.20gb")
    a100 = edit(a100, "gpu: A100-SXM4-80GB", "gpu: A100-SXM4-40GB")
    diags = run(a100)
    [d] = _codes(diags, "GP664")
    assert "1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb" in d.message
    assert not [x for x in diags if x.code.startswith("GP2")]  # the geometry itself is fine


def test_gp665_gke_sharing_bounds(run):
    many = edit(BASE, "replicas: 4}", "replicas: 64}")
    assert any("between 2 and 48" in d.message for d in _codes(run(many), "GP665"))
    wide = edit(BASE, "maxGPUsPerPod: 1,", "maxGPUsPerPod: 2,")
    [d] = _codes(run(wide), "GP665")
    assert d.hint == "set maxGPUsPerPod: 1"
    renamed = edit(BASE, "replicas: 4}", "replicas: 4, renameByDefault: true}")
    assert any("renameByDefault" in d.message for d in _codes(run(renamed), "GP665"))
    assert _codes(run(BASE), "GP665") == []


def test_partitions_and_whole_gpus_of_other_pools_never_share_a_quota(tmp_path):
    """GKE advertises its partitions and shares as nvidia.com/gpu, like the whole GPUs of another
    pool: without enforcePriority each such tier still gets a quota scoped to its class, with its
    own grant (GP666 is retired: nothing left for it to find)."""
    from gpuplan.compiler import check_fleet, placement_docs

    loose = BASE.replace(", enforcePriority: true}", "}").replace(",\n       enforcePriority: true}", "}")
    assert loose != BASE
    p = tmp_path / "fleet.yaml"
    p.write_text(loose, encoding="utf-8")
    checked = check_fleet(p)
    assert not [d for d in checked.diagnostics if d.code in ("GP666", "GP527")]
    rf = checked.resolved
    scoped = {(d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"]["hard"] for d in placement_docs(rf)
              if d["kind"] == "ResourceQuota" and d["metadata"]["name"].startswith("gpuplan-tier-")}
    for tn in rf.fleet.spec.tenants:
        for ns, grants in tn.quotas.items():
            for tier, units in grants.items():
                if tier in ("serve", "training", "notebooks"):
                    assert scoped[(ns, f"gpuplan-tier-{tier}")] == {"requests.nvidia.com/gpu": str(units)}


def test_gp667_what_each_gke_path_can_do(run):
    cos = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
               "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, driver: gpu-operator}")
    [d] = _codes(run(cos), "GP667")
    assert "Ubuntu" in d.message
    old = edit(cos, "    gcp:", "    gpuOperator: {chartVersion: v24.3.0}\n    gcp:")
    assert any("v24.6.0" in d.message for d in _codes(run(old), "GP667"))
    topo = edit(BASE, "      gpu: H100-SXM5-80GB\n", "      gpu: H100-SXM5-80GB\n      topology: {policy: restricted}\n")
    assert any("topology.policy" in d.message for d in _codes(run(topo), "GP667"))


# --- objects ---------------------------------------------------------------------------------


def _tree(run, text):
    from gpuplan.lower.driver import iter_artifacts

    return {a.path: a for a in iter_artifacts(run.resolved(text))}


def test_container_node_pool(run):
    """The node pool gpuplan writes: accelerator from the machine type, GKE's driver, one
    partition size, autoscaling to the ceiling, the identity labels (operands off, no
    device-plugin config label under GKE's own plugin), the template taints in GKE's names."""
    tree = _tree(run, BASE)
    a = tree["provisioning/gke/infer.yaml"]
    assert not a.kustomize  # not synced with the workloads' tree
    [np] = a.documents
    spec = np["spec"]
    assert spec["clusterRef"] == {"external": "projects/ml-platform-prod/locations/us-central1/clusters/ml"}
    assert spec["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 8}
    [acc] = spec["nodeConfig"]["guestAccelerator"]
    assert acc == {"type": "nvidia-a100-80gb", "count": 1,
                   "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}, "gpuPartitionSize": "3g.40gb"}
    labels = spec["nodeConfig"]["labels"]
    assert labels["gpuplan.dev/pool"] == "infer" and labels["nvidia.com/gpu.deploy.operands"] == "false"
    assert "nvidia.com/device-plugin.config" not in labels and "nvidia.com/mig.config" not in labels
    assert "gke-no-default-nvidia-gpu-device-plugin" not in labels  # GKE's plugin serves this pool
    assert spec["nodeConfig"]["taint"] == [{"key": "gpuplan.dev/pool", "value": "infer", "effect": "NO_SCHEDULE"}]
    [dev] = tree["provisioning/gke/dev.yaml"].documents
    [acc] = dev["spec"]["nodeConfig"]["guestAccelerator"]
    assert acc["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4}
    assert dev["spec"]["nodeConfig"]["spot"] is True
    assert "provisioning/gke/kustomization.yaml" in tree
    assert "gpu-operator/mig-parted-config.yaml" not in tree  # GKE partitions, no mig-manager


def test_operator_path_node_pool_disables_gkes_driver(run):
    text = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, driver: gpu-operator, imageType: UBUNTU_CONTAINERD}")
    tree = _tree(run, text)
    [np] = tree["provisioning/gke/train.yaml"].documents
    [acc] = np["spec"]["nodeConfig"]["guestAccelerator"]
    assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}
    labels = np["spec"]["nodeConfig"]["labels"]
    assert "nvidia.com/gpu.deploy.operands" not in labels and "nvidia.com/device-plugin.config" in labels
    assert labels["gke-no-default-nvidia-gpu-device-plugin"] == "true"  # one nvidia.com/gpu advertiser
    # the operator's driver runs there, beside GKE-driven pools: one NVIDIADriver for this pool
    drivers = tree["gpu-operator/nvidiadrivers.yaml"].documents
    assert [d["spec"]["nodeSelector"] for d in drivers] == [{"gpuplan.dev/pool": "train"}]


def test_generated_node_pools_pass_the_pinned_schema(run, tmp_path):
    """The ContainerNodePools verify against Config Connector v1.155.1's CRD (pinned), and a
    wrong taint effect would not (the check is not vacuous)."""
    from gpuplan.verify.verifier import Options, verify_paths
    from gpuplan.compiler import compile_fleet

    spec = tmp_path / "f.yaml"
    spec.write_text(BASE, encoding="utf-8")
    compiled = compile_fleet(spec, out_dir=tmp_path / "out")
    assert not [d for d in compiled.diagnostics if d.is_error], compiled.diagnostics
    out = tmp_path / "out" / "provisioning" / "gke"
    out.mkdir(parents=True)
    text = compiled.files["provisioning/gke/infer.yaml"]
    (out / "infer.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    r = verify_paths([str(out)], Options(kubernetes_version="1.33"))
    assert r.ok and r.stats.not_verified == 0, r.diagnostics
    bad = (out / "infer.yaml").read_text().replace("clusterRef:", "clusterReff:")
    (out / "infer.yaml").write_text(bad)
    assert not verify_paths([str(out)], Options(kubernetes_version="1.33")).ok


# --- placement proof and quotas ---------------------------------------------------------------


def test_proof_shows_each_tier_on_its_partition_size(run):
    """The proof reads the ContainerNodePools (labels + what GKE sets: partition size, GPU taint):
    each tier's pod lands on its own pool only, selecting its partition size."""
    from gpuplan.compiler import object_docs
    from gpuplan.placement.simulate import pools_from_objects, proof

    rf = run.resolved(BASE)
    docs = object_docs(rf)["gpuplan.objchecks.placement"]
    pools = {p.name: p for p in pools_from_objects(rf, docs)}
    assert pools["infer"].labels["cloud.google.com/gke-gpu-partition-size"] == ("3g.40gb",)
    assert ("nvidia.com/gpu", "", "NoSchedule") in pools["infer"].taints
    p = proof(rf, docs)
    assert all(v.ok for v in p.verdicts)
    landing = {v.tier: v.pools for v in p.verdicts if v.namespace == "a-ns"}
    assert landing == {"serve": ["infer"], "training": ["train"], "notebooks": ["dev"]}


def test_the_partition_selector_is_modelled_not_assumed(run):
    """The proof's fit check holds the tier's partition-size selector against the node labels:
    the same node pool with another partition size takes no pod of the tier."""
    import dataclasses

    from gpuplan.compiler import object_docs
    from gpuplan.identity import contract_pod
    from gpuplan.placement.simulate import fits, pools_from_objects

    rf = run.resolved(BASE)
    pools = {p.name: p for p in pools_from_objects(rf, object_docs(rf)["gpuplan.objchecks.placement"])}
    pod = contract_pod(rf, rf.tier_by_name["serve"], "a-ns")
    assert fits(pod, pools["infer"])
    other = dataclasses.replace(pools["infer"], labels={
        **pools["infer"].labels, "cloud.google.com/gke-gpu-partition-size": ("1g.10gb",)})
    assert not fits(pod, other)


def test_quota_cannot_be_spent_on_another_tiers_partition(run):
    """PriorityClass-scoped quotas: in a namespace granted `serve` (MIG partitions) and
    `training` (whole GPUs), both nvidia.com/gpu, each class may hold only its own grant."""
    from gpuplan.compiler import planned_quotas
    from gpuplan.identity import priority_class_name, quota_cap

    rf = run.resolved(BASE)
    quotas = [q for q in planned_quotas(rf) if q["metadata"]["namespace"] == "a-ns"]
    tiers = rf.tier_by_name
    assert quota_cap(quotas, priority_class_name(tiers["serve"]), "nvidia.com/gpu") == 4
    assert quota_cap(quotas, priority_class_name(tiers["training"]), "nvidia.com/gpu") == 8
    assert quota_cap(quotas, priority_class_name(tiers["notebooks"]), "nvidia.com/gpu") == 4
    assert quota_cap(quotas, "", "nvidia.com/gpu") == 0  # a pod of no tier class gets none


# --- operator values, disruption, example ----------------------------------------------------


def test_operator_values_leave_gke_pools_alone(run):
    """No mig-manager and no device-plugin config entry for pools GKE serves; the cluster's MIG
    strategy ignores GKE's MIG."""
    from gpuplan.identity import cluster_mig_strategy, mig_manager_needed
    from gpuplan.lower.device_plugin import configs

    rf = run.resolved(BASE)
    assert not mig_manager_needed(rf) and cluster_mig_strategy(rf) == "none"
    assert list(configs(rf)) == ["gpuplan.default"]


def test_plan_base_says_an_immutable_change_replaces_the_node_pool(run, tmp_path):
    """A new partition size changes `guestAccelerator`, immutable in the CRD: Config Connector
    refuses the update, so the report is a hand step (not a Karpenter drift); a new node image
    recreates the nodes (replace)."""
    from gpuplan.report.disruption import by_pool, disruptions_of
    from gpuplan.output.objdiff import tree_objects

    def parsed(text):
        from gpuplan.compiler import compile_fleet

        spec = tmp_path / f"f{abs(hash(text))}.yaml"
        spec.write_text(text, encoding="utf-8")
        return tree_objects(compile_fleet(spec, out_dir=tmp_path / "none").files)

    new = edit(BASE, "layout: {3g.40gb: 2}", "layout: {1g.10gb: 7}").replace("profile: 3g.40gb", "profile: 1g.10gb")
    ds = disruptions_of(parsed(BASE), parsed(new))
    [d] = [d for d in ds if d.subject == "ContainerNodePool infer (pool infer)"]
    assert d.severity == "hand-step" and "guestAccelerator" in d.message
    assert "pool infer: node pool recreated by hand (ContainerNodePool)" in by_pool(ds)
    img = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
               "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, imageType: UBUNTU_CONTAINERD}")
    ds = disruptions_of(parsed(BASE), parsed(img))
    [d] = [d for d in ds if d.subject == "ContainerNodePool train (pool train)"]
    assert d.severity == "replace" and "not a Karpenter drift" in d.message
    assert "pool train: every node replaced (ContainerNodePool)" in by_pool(ds)


def test_example_is_clean(run):
    diags = run(EXAMPLE)
    assert not [d for d in diags if d.is_error or d.severity.value == "warning"], diags


def test_verify_cluster_checks_the_labels_gke_sets(run):
    """A GKE MIG node must carry the partition size GKE sets (a node of another size is an error);
    no `nvidia.com/mig.config.state` is expected (no mig-manager under GKE's MIG), and GKE's own
    GPU taint is not required (GKE adds it only beside non-GPU pools)."""
    from gpuplan.drift import Live, verify

    rf = run.resolved(BASE)

    def node(partition):
        return {"metadata": {"name": "gke-ml-infer-1", "labels": {
                    "gpuplan.dev/pool": "infer", "nvidia.com/gpu.deploy.operands": "false",
                    "cloud.google.com/gke-nodepool": "infer", "cloud.google.com/gke-accelerator": "nvidia-a100-80gb",
                    "cloud.google.com/gke-gpu-partition-size": partition}},
                "spec": {"taints": [{"key": "gpuplan.dev/pool", "value": "infer", "effect": "NoSchedule"}]},
                "status": {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}}}

    good = verify(rf, Live(nodes={"gke-ml-infer-1": node("3g.40gb")}, saw_nodes=True), [])
    assert [d for d in good.diagnostics if d.is_error or d.severity.value == "warning"] == []
    bad = verify(rf, Live(nodes={"gke-ml-infer-1": node("1g.10gb")}, saw_nodes=True), [])
    assert any("cloud.google.com/gke-gpu-partition-size" in d.message for d in bad.diagnostics if d.is_error)


def test_reports_name_the_node_pool_not_karpenter_or_bottlerocket(run):
    """The capacity explanation names the GKE ceiling; the monitoring runbook says why DCGM alerts
    are left out on a GKE-stack pool (GKE's own stack, not Bottlerocket)."""
    from gpuplan.lower.monitoring import left_out
    from gpuplan.units import capacity_explanation

    rf = run.resolved(BASE)
    infer = rf.pools[0]
    assert capacity_explanation(infer, "nvidia.com/gpu") == "8 nodes (GKE node pool maxGPUs 8) × 2 per node"
    mon = run.resolved(BASE.replace("  tiers:\n", "  monitoring: {}\n  tiers:\n", 1))
    why = left_out(mon, mon.pools[0])["DCGMExporterNotReady"]
    assert "GKE node pool's own GPU stack" in why and "Bottlerocket" not in why


# --- GP675 on the GPU Operator path: GKE's autoscaler sees no nvidia.com/mig-* --------------------

GKE_OPERATOR_MIG = edit(EXAMPLE, "        maxGPUs: 8\n        minNodes: 2\n",
                        "        maxGPUs: 8\n        minNodes: 2\n        driver: gpu-operator\n"
                        "        imageType: UBUNTU_CONTAINERD\n")


def test_an_autoscaled_operator_path_mig_pool_is_refused_at_its_sharing(run):
    """examples/gke.yaml's infer-a100 on the GPU Operator path: mig-manager's partitions are
    nvidia.com/mig-3g.40gb, while GKE's nodes carry the GCE provider's GPU label and the
    autoscaler's template node has only nvidia.com/gpu (cloudprovider/gce/templates.go:83)."""
    [d] = _codes(run(GKE_OPERATOR_MIG), "GP675")
    assert d.is_error and "infer-a100" in d.message and "nvidia.com/mig-3g.40gb" in d.message
    assert GKE_OPERATOR_MIG.count("        mode: mig\n") == 1
    assert (d.line, d.col) == position(GKE_OPERATOR_MIG, "mode: mig\n")  # the pool's sharing block
    assert "gke.minNodes: 8" in d.hint


def test_gke_own_stack_and_a_fixed_size_operator_pool_scale_as_they_should(run):
    """On GKE's own stack each partition is nvidia.com/gpu (no refusal); on the operator path a
    fixed-size pool (minNodes at the ceiling) is not scaled."""
    assert not _codes(run(EXAMPLE), "GP675")
    fixed = edit(GKE_OPERATOR_MIG, "        maxGPUs: 8\n        minNodes: 2\n", "        maxGPUs: 8\n        minNodes: 8\n")
    assert not _codes(run(fixed), "GP675")


def test_a_fixed_size_operator_path_mig_pool_still_counts_unready(run):
    """GP975: GKE puts the GCE provider's GPU label on every node, and the autoscaler counts a
    labelled node without nvidia.com/gpu unready whether or not it scales its pool
    (processors/customresources/gpu_processor.go:41-70): a warning at the pool's sharing."""
    fixed = edit(GKE_OPERATOR_MIG, "        maxGPUs: 8\n        minNodes: 2\n", "        maxGPUs: 8\n        minNodes: 8\n")
    [d] = _codes(run(fixed), "GP975")
    assert d.severity.value == "warning" and "infer-a100" in d.message
    assert "cloud.google.com/gke-accelerator" in d.message
    assert (d.line, d.col) == position(fixed, "mode: mig\n")
    assert not _codes(run(GKE_OPERATOR_MIG), "GP975")  # autoscaled: GP675, not both
    assert not _codes(run(EXAMPLE), "GP975")  # GKE's stack: every partition is nvidia.com/gpu


# --- the system-class quota GKE requires ----------------------------------------------------


def _operator_quota(tree, path="gpu-operator/namespace.yaml"):
    return [d for d in tree[path].documents if d["kind"] == "ResourceQuota"]


def test_operator_namespace_gets_the_quota_gke_requires_for_system_classes(run):
    """GKE refuses system-node-critical pods in a namespace with no ResourceQuota scoped to the
    system PriorityClasses: the operator namespace gets one, in the file that makes the namespace
    (so it exists before the operator Application), on GKE's own stack too (the operator and NFD
    run there)."""
    tree = _tree(run, BASE)
    [q] = _operator_quota(tree)
    assert q["metadata"]["name"] == "gpu-operator-quota" and q["metadata"]["namespace"] == "gpu-operator"
    assert q["spec"]["scopeSelector"] == {"matchExpressions": [
        {"operator": "In", "scopeName": "PriorityClass", "values": ["system-node-critical", "system-cluster-critical"]}]}
    assert tree["gpu-operator/namespace.yaml"].kustomize
    # never binding: the operand DaemonSets on every GPU node (8 + 2 + 4 nodes), nfd-worker on as
    # many nodes as a GKE cluster may have, the three Deployments with a surge pod each
    assert q["spec"]["hard"] == {"pods": str(6 + 18 * 14 + 15_000)}
    more = _tree(run, edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                           "gke: {machineType: a3-highgpu-8g, maxGPUs: 64}"))
    assert _operator_quota(more)[0]["spec"]["hard"] == {"pods": str(6 + 18 * 20 + 15_000)}


def test_flux_puts_the_quota_beside_the_helm_release(run):
    text = edit(BASE, "repoURL: https://git.example.com/fleet.git",
                "engine: flux\n      repoURL: https://git.example.com/fleet.git")
    tree = _tree(run, text)
    path = "delivery/gpu-operator/namespace.yaml"
    assert tree[path].documents[0]["kind"] == "Namespace"
    [q] = _operator_quota(tree, path)
    assert q["metadata"]["namespace"] == "gpu-operator"


def test_no_system_class_quota_off_gke(run):
    from gpuplan.lower.operator import system_class_quota

    assert system_class_quota(run.resolved((REPO / "examples" / "aks.yaml").read_text(encoding="utf-8"))) is None


# --- node upgrades under training jobs --------------------------------------------------------


def test_gp980_gke_upgrades_a_training_pools_nodes(run):
    """GKE's node auto-upgrade recreates a training pool's nodes: a warning at the pool's `gke`
    key, and none for the pools that run no jobs."""
    diags = _codes(run(BASE), "GP980")
    assert [d.severity.value for d in diags] == ["warning"]
    [d] = diags
    assert "'train'" in d.message and d.hint
    assert (d.line, d.col) == position(BASE, "gke: {machineType: a3-highgpu-8g")
    batch = edit(BASE, "workload: inference, priority: 5000", "workload: batch, priority: 5000")
    assert sorted(m.message.split("'")[1] for m in _codes(run(batch), "GP980")) == ["infer", "train"]


def test_auto_upgrade_off_is_written_and_silences_gp980(run):
    text = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, autoUpgrade: false}")
    assert not _codes(run(text), "GP980")
    tree = _tree(run, text)
    [np] = tree["provisioning/gke/train.yaml"].documents
    assert np["spec"]["management"] == {"autoRepair": True, "autoUpgrade": False}
    [other] = tree["provisioning/gke/infer.yaml"].documents
    assert "management" not in other["spec"]  # GKE's default where the spec says nothing


def test_the_dra_drivers_namespace_gets_the_quota_too(run):
    """The DRA driver's controller and kubelet plugin are system-node-critical: on GKE its
    namespace gets the same quota, sized by the DRA pools' nodes."""
    text = edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, driver: gpu-operator, imageType: UBUNTU_CONTAINERD}\n"
                "      allocation: {backend: dra, extendedResources: false}")
    text = edit(text, 'kubernetesVersion: "1.33"', 'kubernetesVersion: "1.34"')
    assert not [d for d in run(text) if d.is_error]
    tree = _tree(run, text)
    [q] = _operator_quota(tree, "dra-driver/namespace.yaml")
    assert q["metadata"]["namespace"] == "dra-driver-nvidia-gpu"
    assert q["spec"]["hard"] == {"pods": str(4 + 2)}  # two Deployments with a surge pod, 2 DRA nodes
    assert q["spec"]["scopeSelector"] == _operator_quota(tree)[0]["spec"]["scopeSelector"]


def test_tenant_page_of_a_training_tier_says_gke_upgrades_its_nodes(run):
    page = _tree(run, BASE)["tenants/a/README.md"].text
    training = page.split("## Tier training")[1].split("\n## ")[0]
    assert "GKE upgrades this pool's nodes itself" in training
    assert page.count("GKE upgrades this pool's nodes itself") == 1
    off = _tree(run, edit(BASE, "gke: {machineType: a3-highgpu-8g, maxGPUs: 16}",
                          "gke: {machineType: a3-highgpu-8g, maxGPUs: 16, autoUpgrade: false}"))
    assert "GKE upgrades this pool's nodes itself" not in off["tenants/a/README.md"].text


def test_operator_path_mig_pools_have_mig_manager_reboot(run):
    """On Compute Engine VMs mig-manager must reboot the node to turn MIG mode on (NVIDIA's MIG
    guide; gpuplan/upstream/nodes/gke.json `migManager.withReboot`): a fleet with a GKE MIG pool on
    the GPU Operator path gets WITH_REBOOT; GKE's own stack partitions the GPUs itself."""
    fixed = edit(GKE_OPERATOR_MIG, "        maxGPUs: 8\n        minNodes: 2\n", "        maxGPUs: 8\n        minNodes: 8\n")

    def mig_manager(text):
        return _tree(run, text)["gpu-operator/values.yaml"].documents[0]["migManager"]

    assert {"name": "WITH_REBOOT", "value": "true"} in mig_manager(fixed).get("env", [])
    assert "env" not in mig_manager(EXAMPLE)
