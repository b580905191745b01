"""Diagnostic codes of `gpuplan import` (GP940-GP944, GP950-GP969): findings in the live
cluster, values the importer could not infer, and the round trip.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

W_GPU_FAULT = Code(
    "GP940", "GPU node in a faulty state", Severity.WARNING,
    "A node's labels say its GPUs are not usable as configured: GPU Feature Discovery labels it "
    "`<model>-MIG-INVALID` under the `single` MIG strategy (MIG profiles mixed on the node, a MIG-enabled GPU "
    "with no MIG device, or MIG-enabled beside MIG-disabled GPUs; `nvidia.com/gpu.count` is 0), or mig-manager "
    "set `nvidia.com/mig.config.state=failed`. The node is not counted as capacity and is left out of the "
    "draft's pools: fix the node (or its MIG config) and import again, or add it to its pool by hand.",
    bad="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-INVALID",
    good="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb   # one profile on every GPU",
)
W_SHARING_UNREAD = Code(
    "GP941", "GPU sharing not read", Severity.WARNING,
    "The cluster configures a pool's GPU sharing outside the GPU Operator's ConfigMaps in a way the draft "
    "cannot take: a Bottlerocket EC2NodeClass whose userData is not TOML, or asks its NVIDIA device plugin for "
    "a `device-sharing-strategy` gpuplan does not write (only `time-slicing`); a NodeOverlay whose "
    "`nvidia.com/gpu` (or `.shared`) capacity is not a whole multiple of the instance type's GPUs, or that "
    "disagrees with the device-plugin config the nodes select (Karpenter plans with the overlay's count, the "
    "node advertises the config's). The pool's sharing is drafted from the other sources: check it.",
    bad="capacity: {nvidia.com/gpu: \"8\"}   # on p5.48xlarge (8 GPUs), config time-slicing replicas 4",
    good="capacity: {nvidia.com/gpu: \"32\"}  # 8 GPUs x 4 replicas",
)
I_NOT_GPU = Code(
    "GP944", "NodePool without GPUs left as it is", Severity.INFO,
    "A Karpenter NodePool in the input asks for no GPU instance (no GPU requirement, GPU instance family or "
    "category, `nvidia.com/gpu` limit or taint): it is the cluster's CPU capacity, not a GPU pool. The draft "
    "leaves it out and gpuplan never writes or prunes it; a NodePool that does ask for GPUs gpuplan's table "
    "does not know is GP952 instead.",
    bad="requirements: [{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}]",
    good="(nothing to change: the NodePool stays as the cluster has it)",
)
E_NOTHING = Code(
    "GP950", "nothing to import", Severity.ERROR,
    "The input holds no GPU node (no `nvidia.com/gpu.product` or `nvidia.com/gpu.count` label) and no "
    "Karpenter NodePool, so there is no pool to write.",
    bad="kubectl get configmaps -A -o json | gpuplan import -",
    good="kubectl get nodes,configmaps,priorityclasses,resourcequotas,namespaces -A -o json | gpuplan import -",
)
W_BAD_NAME = Code(
    "GP951", "name not usable in fleet.yaml", Severity.WARNING,
    "A name from the cluster (a pool label, NodePool, namespace, tier or PriorityClass) is not a DNS-1123 "
    "label, so it cannot name a pool, tier or tenant; the object is left out of the draft.",
    bad="metadata: {name: \"Team A: prod\"}", good="metadata: {name: team-a-prod}",
)
W_UNKNOWN_GPU = Code(
    "GP952", "GPU model unknown", Severity.WARNING,
    "A node's `nvidia.com/gpu.product` (or a NodePool's instance types) names no GPU in gpuplan's catalog; "
    "the node or NodePool is left out of the draft.",
    bad="nvidia.com/gpu.product: NVIDIA-Mystery-1", good="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB",
)
E_MIG_IMPOSSIBLE = Code(
    "GP953", "mig-parted config cannot be created", Severity.ERROR,
    "A mig-parted config that a node selects (`nvidia.com/mig.config`) asks for a layout the GPU cannot "
    "hold; mig-manager fails on it and sets `nvidia.com/mig.config.state=failed`. The draft keeps the "
    "layout so `gpuplan validate` points at it; fix it before building.",
    bad="mig-devices: {3g.40gb: 2, 1g.10gb: 2}   # A100-SXM4-80GB: 10 memory slices of 8",
    good="mig-devices: {3g.40gb: 2, 1g.10gb: 1}",
)
W_QUOTA_OVER = Code(
    "GP954", "quotas above capacity", Severity.WARNING,
    "The ResourceQuotas of all namespaces grant more of a GPU resource than the pools that advertise it "
    "have (nodes x units per node; a Karpenter pool counts its node limit). Pods within quota can stay "
    "Pending; gpuplan's capacity rules (GP4xx) will say so too.",
    bad="hard: {requests.nvidia.com/gpu: \"64\"}   # 2 nodes x 8 GPUs", good="hard: {requests.nvidia.com/gpu: \"16\"}",
)
W_UNUSED_CONFIG = Code(
    "GP955", "config no node selects", Severity.WARNING,
    "A device-plugin or mig-parted config is in the ConfigMap but no node (and no NodePool template) "
    "selects it by label, and it is not the default: it configures nothing. gpuplan will not carry it over.",
    bad="data: {ts-8: ...}   # no node has nvidia.com/device-plugin.config=ts-8",
    good="nvidia.com/device-plugin.config: ts-8 on the nodes that should share GPUs",
)
W_MISSING_CONFIG = Code(
    "GP956", "node selects a config that does not exist", Severity.WARNING,
    "A node's `nvidia.com/device-plugin.config` or `nvidia.com/mig.config` names a config the ConfigMap "
    "does not hold; the device plugin or mig-manager fails on that node. The pool's sharing is left as TODO.",
    bad="nvidia.com/mig.config: all-1g.10gb   # not in the mig-parted config",
    good="nvidia.com/mig.config: all-disabled",
)
W_POOL_DISAGREES = Code(
    "GP957", "nodes of one pool disagree", Severity.WARNING,
    "Nodes grouped into one pool (by their pool label or NodePool) differ in GPU model, GPU count, selected "
    "configs or taints; the draft takes the most common value and names the nodes that differ.",
    bad="gpu-01: nvidia.com/gpu.count=8; gpu-02: nvidia.com/gpu.count=4 (same pool)",
    good="every node of a pool has the same GPUs and configs",
)
I_TODO = Code(
    "GP958", "value left to decide", Severity.INFO,
    "The importer could not infer a value from the cluster (the GitOps repository, a tier's pool when "
    "several pools advertise its resource, how a shared quota splits between tiers); the draft marks it "
    "`# TODO` and, where the spec needs a value, uses the first candidate.",
    bad="tiers: [{name: training, pool: a}]   # TODO: or pool b", good="tiers: [{name: training, pool: b}]",
)
W_UNEXPLAINED = Code(
    "GP959", "gpuplan would change the cluster", Severity.WARNING,
    "Building the draft back gives an object that differs from the cluster's in a way that is neither a "
    "named gpuplan convention nor a finding above: review the difference before the first sync.",
    bad="ConfigMap gpu-operator/dp-config: data.x changed", good="no difference beyond the named conventions",
)
E_EXISTS = Code(
    "GP960", "output file exists", Severity.ERROR,
    "`gpuplan import -o FILE` never overwrites a file (a fleet.yaml you edited) without `--force`, and "
    "never writes through a symbolic link.",
    bad="gpuplan import cluster.json -o fleet.yaml   # fleet.yaml exists",
    good="gpuplan import cluster.json -o fleet.yaml --force",
)
E_DRAFT_INVALID = Code(
    "GP961", "draft does not build", Severity.ERROR,
    "The draft fleet.yaml written from the cluster does not pass `gpuplan validate` (the diagnostics "
    "follow, at the draft's lines); it is still written, so you can fix it, but no round trip was made.",
    bad="a tier whose quota names a resource no pool advertises", good="gpuplan validate fleet.yaml passes",
)
W_UNREAD = Code(
    "GP962", "object not understood", Severity.WARNING,
    "An object of a kind the importer reads has a field of the wrong shape (a label that is not a string, "
    "a config that is not YAML); that object, or field, is left out.",
    bad="data: {dp: \"{not: yaml\"}", good="data: {dp: \"version: v1\"}",
)

W_KUEUE_UNREAD = Code(
    "GP963", "Kueue object not imported", Severity.WARNING,
    "A Kueue object cannot be mapped onto spec.queueing: a ResourceFlavor whose nodeLabels select no one "
    "imported pool, a ClusterQueue that serves no tenant's namespace, a quota on a resource no pool advertises "
    "(cpu, memory: gpuplan's queues cover the tiers' GPU resources only, so Kueue would no longer limit it), or a "
    "GPU quota that is not a whole number of units. That part is left out; the round trip shows what changes.",
    bad="ResourceFlavor a100: nodeLabels {gpu: a100}   # no pool's nodes all carry gpu=a100",
    good="ResourceFlavor a100: nodeLabels {gpuplan.dev/pool: infer-a100}",
)
W_DRA_UNREAD = Code(
    "GP964", "DRA object not imported", Severity.WARNING,
    "A DRA DeviceClass or quota key cannot be mapped onto a tier (no `gpuplan.dev/tier` label and no tier of "
    "that name), or the nodes of one pool disagree on `nvidia.com/gpu.deploy.device-plugin`: that part is left "
    "out, and the pool keeps the device plugin.",
    bad="DeviceClass big-gpus   # no tier big-gpus", good="DeviceClass gpuplan-inference (label gpuplan.dev/tier: inference)",
)
W_NOT_TRUSTED = Code(
    "GP965", "object not trusted as configuration", Severity.WARNING,
    "The export holds objects tenants can create in their own namespaces. The importer takes the GPU "
    "Operator's ConfigMaps (device-plugin and mig-parted configs) only from the operator's namespace (its "
    "ClusterPolicy's status.namespace, else its Deployment gpu-operator, else gpu-operator), and gpuplan's "
    "namespaced objects (ResourceClaimTemplates gpuplan-<tier>-x<N>) only when they carry gpuplan's labels in "
    "a namespace gpuplan manages that is granted the tier, and the Argo CD Applications or Flux HelmReleases "
    "that install charts only from the engine's own namespace (argocd, flux-system, or where its controller "
    "runs). A same-named object anywhere else is this finding, never configuration.",
    bad="ConfigMap aaa-tenant/time-slicing-config   # the operator runs in gpu-operator",
    good="ConfigMap gpu-operator/time-slicing-config",
)
W_VOLCANO_UNREAD = Code(
    "GP969", "Volcano Queue not imported", Severity.WARNING,
    "A Volcano Queue (`scheduling.volcano.sh/v1beta1`) cannot be mapped onto spec.queueing: it takes the jobs of no "
    "imported tenant (no `gpuplan.dev/tenant` label, no tenant of its name, no PodGroup of the input names it), its "
    "`affinity.nodeGroupAffinity` names no imported pool's node group, it holds a resource no pool advertises "
    "(cpu, memory: gpuplan's queues cover the tiers' GPU resources only, so Volcano would no longer limit it) or an "
    "amount that is not a whole number of units, or it sets a field gpuplan does not write (`weight`, `priority`, "
    "`reclaimable: false`, anti-affinity). That part is left out; the round trip shows what changes.",
    bad="Queue team-a: affinity.nodeGroupAffinity.required...: [big-gpus]   # no pool's nodes carry that node group",
    good="Queue team-a: affinity.nodeGroupAffinity.required...: [train-h100]",
)

W_DRIFT = Code(
    "GP966", "Karpenter would replace nodes", Severity.WARNING,
    "The NodePool's template (labels, annotations, taints, startup taints, nodeClassRef, expireAfter, "
    "terminationGracePeriod) or its EC2NodeClass gpuplan builds differs from the cluster's: Karpenter marks "
    "every node of the pool drifted and replaces it (a changed requirement drifts the nodes it no longer "
    "fits). Reproduce the value in the draft, or plan the replacement.",
    bad="spec.template.metadata.labels[\"team\"] removed   # every node of the NodePool is replaced",
    good="labels: {team: ml} on the pool, so the template stays as it is",
)
W_CONSOLIDATION = Code(
    "GP967", "Karpenter would consolidate differently", Severity.WARNING,
    "The NodePool's `spec.disruption` (consolidationPolicy, consolidateAfter, budgets) that gpuplan builds "
    "differs from the cluster's: Karpenter may then take nodes away under running pods (a training pool "
    "becomes consolidatable) or keep nodes it removed before. gpuplan chooses disruption from the tiers' "
    "`workload` and `karpenter.consolidateAfter`.",
    bad="consolidationPolicy: WhenEmpty -> WhenEmptyOrUnderutilized",
    good="tiers: [{name: train, pool: p, workload: training}]",
)
W_DELIVERY = Code(
    "GP968", "Argo CD would sync another source", Severity.WARNING,
    "An Argo CD Application gpuplan builds has the name of one in the cluster but another source "
    "(repoURL, targetRevision, path, Helm chart or version): on the first sync Argo CD deploys from there.",
    bad="source.repoURL: https://git.example.com/TODO/gpu-fleet.git",
    good="cluster.gitops.repoURL as the cluster's Application has it",
)

W_STANDALONE = Code(
    "GP943", "NVIDIA device plugin or mig-manager outside the GPU Operator", Severity.WARNING,
    "A DaemonSet no ClusterPolicy owns runs NVIDIA's device plugin (image k8s-device-plugin: its static "
    "manifest or Helm chart) or mig-manager. The draft installs the GPU Operator, which runs its own: two "
    "device plugins register nvidia.com/gpu with one kubelet, which keeps only the latest registration, so "
    "the two take the node's GPUs from each other; two mig-managers repartition the same GPUs. Delete the "
    "DaemonSet (or uninstall its Helm release) before the first sync. The ConfigMap it mounts is drafted as "
    "the operator's device-plugin (or mig-parted) configs, so its sharing stays as it is.",
    bad="kube-system/nvidia-device-plugin-daemonset beside the operator's nvidia-device-plugin-daemonset",
    good="kubectl delete daemonset -n kube-system nvidia-device-plugin-daemonset   # then sync",
)

CODES = (W_GPU_FAULT, W_SHARING_UNREAD, I_NOT_GPU, E_NOTHING, W_BAD_NAME, W_UNKNOWN_GPU, E_MIG_IMPOSSIBLE, W_QUOTA_OVER, W_UNUSED_CONFIG, W_MISSING_CONFIG,
         W_POOL_DISAGREES, I_TODO, W_UNEXPLAINED, E_EXISTS, E_DRAFT_INVALID, W_UNREAD,
         W_KUEUE_UNREAD, W_DRA_UNREAD, W_VOLCANO_UNREAD, W_NOT_TRUSTED, W_DRIFT, W_CONSOLIDATION, W_DELIVERY, W_STANDALONE)
