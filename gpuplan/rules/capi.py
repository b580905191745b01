"""GP676-GP678, GP691-GP694: Cluster API pools — what the MachineDeployment, its bootstrap config
and the Cluster Autoscaler's clusterapi provider need from the spec.

The nodes of a Cluster API pool get gpuplan's labels from the kubelet's ``--node-labels``
(``gpuplan.provisioning.capi``), which the kubelet checks itself; the autoscaler learns a
node group's future nodes from annotations (kubernetes/autoscaler@cluster-autoscaler-1.36.1
cluster-autoscaler/cloudprovider/clusterapi/README.md "Scale from zero support") and limits
GPUs by the ``cluster-api/accelerator`` label value (README.md:496-518). The version rules of the
autoscaler (GP675, GP679) are in ``gpuplan.rules.autoscaler``.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import GPU, ResolvedFleet

# kubernetes/kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go: the only
# kubernetes.io / k8s.io label keys a kubelet may set on its own Node, and the namespaces it may
# use; cmd/kubelet/app/options/options.go ValidateKubeletFlags exits on any other.
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
    "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
K8S_DOMAINS = ("kubernetes.io", "k8s.io")

E_NO_CAPI = Code(
    "GP691", "Cluster API pool without cluster.capi", Severity.ERROR,
    "A MachineDeployment names its Cluster (`spec.clusterName`) and lives in that Cluster's namespace "
    "in the management cluster; its machines run one Kubernetes version. Set `cluster.capi` when any "
    "pool uses `capi`.",
    bad="cluster:\n  kubernetesVersion: \"1.33\"\n  # no capi:\npools:\n  - {name: train, capi: {...}}",
    good="cluster:\n  capi: {clusterName: lab, namespace: lab, version: v1.33.4}",
)
E_NO_GPUS_PER_NODE = Code(
    "GP692", "Cluster API pool cannot be sized in machines", Severity.ERROR,
    "gpuplan cannot read a Cluster API infrastructure template (Metal3, vSphere, AWS, ...): the GPUs "
    "per node must be in the spec (`gpusPerNode`). They turn `maxGPUs` into the ceiling in machines "
    "(rounded down), which must be at least one machine and at least `minNodes`: the autoscaler skips a "
    "MachineDeployment whose max size is 0 (cluster-autoscaler-1.36.1 clusterapi_nodegroup.go:568-576) "
    "and never scales one past its max size.",
    bad="- name: train\n  gpu: H100-SXM5-80GB\n  capi: {infrastructureRef: {...}, maxGPUs: 32, minNodes: 6}",
    good="- name: train\n  gpu: H100-SXM5-80GB\n  gpusPerNode: 8\n  capi: {infrastructureRef: {...}, maxGPUs: 32, minNodes: 2}",
)
E_GPU_TOTAL_TYPE = Code(
    "GP676", "--gpu-total does not name the pool's accelerator", Severity.ERROR,
    "The Cluster Autoscaler counts a node's GPUs under the value of its `cluster-api/accelerator` "
    "label, and `--gpu-total=<type>:<min>:<max>` limits only that type: the type must equal the "
    "label value, or the pool's GPUs are outside the limit and the autoscaler may create too many "
    "(kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/clusterapi/"
    "README.md:510-518; processors/customresources/gpu_processor.go:81-93).",
    bad="cluster:\n  capi: {..., gpuTotal: [{type: nvidia-a100, max: 64}]}\n"
        "pools:\n  - {name: infer, gpu: A100-SXM4-80GB, capi: {...}}   # accelerator a100-sxm4-80gb",
    good="cluster:\n  capi: {..., gpuTotal: [{type: a100-sxm4-80gb, max: 64}]}",
)
E_KUBELET_LABEL = Code(
    "GP677", "label the kubelet may not set", Severity.ERROR,
    "A Cluster API pool's labels are set by the kubelet itself (`--node-labels` from the bootstrap "
    "config): Cluster API copies only `node-role.kubernetes.io`, `node-restriction.kubernetes.io` and "
    "`node.cluster.x-k8s.io` Machine labels to Nodes (kubernetes-sigs/cluster-api@v1.14.0 "
    "util/labels/helpers.go:79-107). The kubelet refuses to start with a `kubernetes.io` or `k8s.io` "
    "label outside `kubelet.kubernetes.io`, `node.kubernetes.io` and a short allowed list "
    "(kubernetes/kubernetes cmd/kubelet/app/options/options.go ValidateKubeletFlags; "
    "staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go): the machine never joins.",
    bad="labels: {node-role.kubernetes.io/gpu: \"\"}",
    good="labels: {node.kubernetes.io/gpu-role: training}",
)
W_NO_ZERO_CAPACITY = Code(
    "GP678", "pool may scale to zero without CPU and memory", Severity.WARNING,
    "The Cluster Autoscaler scales a MachineDeployment from zero only if it knows the CPU and memory "
    "of its future nodes: the `capacity.cluster-autoscaler.kubernetes.io/cpu` and `/memory` "
    "annotations (`capi.cpu`, `capi.memory`), else the infrastructure template's `status.capacity`, "
    "which only some providers fill (cluster-autoscaler-1.36.1 clusterapi_unstructured.go:285-296, "
    "clusterapi_nodegroup.go:562-566: a group at zero without them is no node group at all).",
    bad="capi: {infrastructureRef: {...}, maxGPUs: 32}             # minNodes 0, no cpu/memory",
    good="capi: {infrastructureRef: {...}, maxGPUs: 32, cpu: \"128\", memory: 2Ti}",
)

W_GPU_TOTAL_LOW = Code(
    "GP693", "--gpu-total stops the autoscaler below the pools' ceiling", Severity.WARNING,
    "The Cluster Autoscaler counts a node's GPUs as the `nvidia.com/gpu` it advertises "
    "(cluster-autoscaler-1.36.1 processors/customresources/gpu_processor.go:91-92), so a time-shared "
    "GPU counts once per replica and a MIG `single` instance once per instance. A `--gpu-total` maximum "
    "below what the pools labelled with its type advertise at their ceilings stops scale-up early: "
    "quotas and the capacity report promise more than the cluster will get.",
    bad="gpuTotal: [{type: l40s, max: 24}]   # notebooks: 6 nodes x 4 GPUs x 4 replicas = 96",
    good="gpuTotal: [{type: l40s, max: 96}]",
)

E_NAME_TOO_LONG = Code(
    "GP694", "pool name too long for a MachineDeployment", Severity.ERROR,
    "A Cluster API pool's MachineDeployment is `gpuplan-<pool>`, and Cluster API's webhook refuses a "
    "MachineDeployment whose name is not a label value (at most 63 characters; it becomes the "
    "`cluster.x-k8s.io/deployment-name` label of its MachineSets and Machines: "
    "kubernetes-sigs/cluster-api@v1.14.0 core/webhooks/admission/machinedeployment.go:157).",
    bad="- name: inference-a100-80gb-mig-1g10gb-and-3g40gb-for-the-vision-team",
    good="- name: vision-infer-a100",
)

CODES = (E_GPU_TOTAL_TYPE, E_KUBELET_LABEL, W_NO_ZERO_CAPACITY, E_NO_CAPI, E_NO_GPUS_PER_NODE, W_GPU_TOTAL_LOW,
         E_NAME_TOO_LONG)


def kubelet_may_set(key: str) -> bool:
    """Whether the kubelet accepts ``key`` in ``--node-labels`` (well_known_labels.go IsKubeletLabel)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    if not any(domain == d or domain.endswith("." + d) for d in K8S_DOMAINS):
        return True
    if key in KUBELET_LABELS:
        return True
    return any(domain == ns or domain.endswith("." + ns) for ns in KUBELET_LABEL_NAMESPACES)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    from gpuplan.provisioning import capi

    pools = [pv for pv in rf.pools if pv.pool.capi is not None]
    if not pools:
        return
    cfg = rf.fleet.spec.cluster.capi
    if cfg is None:
        yield rf.diag(E_NO_CAPI, "pools " + ", ".join(pv.name for pv in pools) + " use Cluster API but "
                      "cluster.capi is not set", ("spec", "cluster"), key=True,
                      hint="add cluster.capi: {clusterName: <Cluster name>, namespace: <its namespace>, "
                           "version: v1.33.x}")
    totals = {t.type for t in cfg.gpu_total} if cfg is not None and cfg.gpu_total else None
    counted: dict[str, list] = {}
    for pv in pools:
        s = pv.pool.capi
        md = capi.deployment_name(pv.name)
        if len(md) > capi.MAX_DEPLOYMENT_NAME:
            yield rf.diag(E_NAME_TOO_LONG, f"pool {pv.name}: its MachineDeployment {md} is longer than "
                          f"{capi.MAX_DEPLOYMENT_NAME} characters, which Cluster API refuses",
                          (*pv.path, "name"), hint=f"shorten the pool name to at most "
                          f"{capi.MAX_DEPLOYMENT_NAME - len(capi.deployment_name(''))} characters")
        if not pv.gpus_per_node:
            yield rf.diag(E_NO_GPUS_PER_NODE, f"pool {pv.name}: a Cluster API pool needs gpusPerNode",
                          pv.path, hint="add gpusPerNode: the GPUs each machine of the infrastructure template has")
            continue
        if capi.max_nodes(pv) == 0:
            yield rf.diag(E_NO_GPUS_PER_NODE, f"pool {pv.name}: maxGPUs {s.max_gpus} is less than one machine "
                          f"({pv.gpus_per_node} GPUs)", (*pv.path, "capi", "maxGPUs"),
                          hint=f"set maxGPUs to at least {pv.gpus_per_node}")
            continue
        if s.min_nodes > capi.max_nodes(pv):
            yield rf.diag(E_NO_GPUS_PER_NODE, f"pool {pv.name}: minNodes {s.min_nodes} is above the ceiling of "
                          f"{capi.max_nodes(pv)} machines (maxGPUs {s.max_gpus} / {pv.gpus_per_node})",
                          (*pv.path, "capi", "minNodes"),
                          hint=f"raise maxGPUs to {s.min_nodes * pv.gpus_per_node}, or lower minNodes")
        for key in sorted(pv.pool.labels):
            if not kubelet_may_set(key):
                yield rf.diag(E_KUBELET_LABEL, f"pool {pv.name}: the kubelet refuses --node-labels key {key} "
                              "(kubernetes.io / k8s.io keys only under kubelet.kubernetes.io, node.kubernetes.io)",
                              (*pv.path, "labels", key), key=True,
                              hint="use your own domain, or node.kubernetes.io/<name>")
        label = capi.platform_labels(pv).get(capi.ACCELERATOR_LABEL)
        if totals is not None and label is not None and label not in totals:
            yield rf.diag(E_GPU_TOTAL_TYPE, f"pool {pv.name}: its nodes are labelled cluster-api/accelerator={label}, "
                          f"which cluster.capi.gpuTotal does not limit ({', '.join(sorted(totals))})",
                          (*pv.path, "capi"), key=True,
                          hint=f"add {{type: {label}, max: ...}} to cluster.capi.gpuTotal, or set capi.accelerator "
                               "to a type it lists")
        if label is not None:
            counted.setdefault(label, []).append(pv)
        if not capi.fixed_size(pv) and s.min_nodes == 0 and (s.cpu is None or s.memory is None):
            yield rf.diag(W_NO_ZERO_CAPACITY, f"pool {pv.name} may scale to zero nodes, but capi.cpu and capi.memory "
                          "are not both set: the Cluster Autoscaler scales it up from zero only if the "
                          "infrastructure template reports status.capacity", (*pv.path, "capi"), key=True,
                          hint="set capi.cpu and capi.memory to one machine's capacity (e.g. cpu: \"128\", memory: 2Ti)")
    for i, t in enumerate(cfg.gpu_total or () if cfg is not None else ()):
        pvs = counted.get(t.type, [])
        need = sum(capi.max_nodes(pv) * pv.node_resources().get(GPU, 0) for pv in pvs)
        if pvs and t.max < need:
            yield rf.diag(W_GPU_TOTAL_LOW, f"--gpu-total={t.type}:{t.min}:{t.max} stops the Cluster Autoscaler before pools "
                          f"{', '.join(pv.name for pv in pvs)} reach their ceiling ({need} nvidia.com/gpu advertised)",
                          ("spec", "cluster", "capi", "gpuTotal", i, "max"),
                          hint=f"set max to {need} or more, or lower the pools' maxGPUs")
