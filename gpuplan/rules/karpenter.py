"""GP610-GP629, GP653-GP654: Karpenter pools — instance types, AMIs, limits, what Karpenter can
see, EFA and capacity reservations.

The instance type decides the GPU (reference/k8s/facts.md §b): a pool's
instance types must carry the pool's GPU model (matched by Karpenter's
``instance-gpu-name`` and per-GPU memory, so p4d = A100 40GB and p4de = A100
80GB) and all the same number of GPUs, because quota, NodePool limits and
NodeOverlay capacity are computed in whole nodes of one size.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import GPU, PoolView, ResolvedFleet

E_UNKNOWN_TYPE = Code(
    "GP610", "unknown instance type", Severity.ERROR,
    "An instance type gpuplan does not know as an AWS GPU instance type (catalog: Karpenter v1.14's "
    "instance-type reference). Either a typo, or a type without NVIDIA GPUs Karpenter can count.",
    bad="karpenter: {instanceTypes: [p4d.24xlarg], maxGPUs: 16}",
    good="karpenter: {instanceTypes: [p4d.24xlarge], maxGPUs: 16}",
)
E_WRONG_GPU = Code(
    "GP611", "instance type has a different GPU", Severity.ERROR,
    "The instance type decides the GPU: g4dn.4xlarge has one T4, p4d.24xlarge eight A100 40GB, "
    "p4de.24xlarge eight A100 80GB, p5.48xlarge eight H100 80GB. A pool whose instance types carry "
    "another GPU than its `gpu` gets MIG layouts, device-plugin configs and quotas for hardware it "
    "will never have.",
    bad="pools:\n  - name: train\n    gpu: A100-SXM4-80GB\n    gpusPerNode: 4\n"
        "    karpenter: {instanceTypes: [g4dn.4xlarge], maxGPUs: 16}   # 1x T4",
    good="pools:\n  - name: train\n    gpu: A100-SXM4-80GB\n    karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16}",
)
E_GPU_COUNT = Code(
    "GP612", "instance type has a different number of GPUs", Severity.ERROR,
    "Every instance type of a Karpenter pool must have the pool's `gpusPerNode` GPUs (when given), "
    "and all must have the same number: NodePool limits, quotas, MIG layouts and NodeOverlay capacity "
    "are computed for one node size. Put different sizes in different pools.",
    bad="gpu: L40S\nkarpenter: {instanceTypes: [g6e.12xlarge, g6e.48xlarge], maxGPUs: 16}   # 4 and 8 GPUs",
    good="gpu: L40S\nkarpenter: {instanceTypes: [g6e.12xlarge, g6e.24xlarge], maxGPUs: 16}  # 4 GPUs each",
)
W_AMI_LATEST = Code(
    "GP613", "AMI not pinned", Severity.WARNING,
    "`amiVersion: latest` (the default) resolves the newest EKS AMI: every AMI release drifts every "
    "node of the pool, and Karpenter replaces them (running training jobs included, unless drift is "
    "blocked). Pin a version and bump it in a reviewed change.",
    bad="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16}   # amiVersion: latest",
    good="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714}",
)
E_NO_AWS = Code(
    "GP614", "Karpenter pool without cluster.aws", Severity.ERROR,
    "An EC2NodeClass needs the node IAM role and the cluster name (subnet and security-group "
    "discovery tags): set `cluster.aws` when any pool uses Karpenter.",
    bad="cluster:\n  kubernetesVersion: \"1.33\"\n  # no aws:\npools:\n  - {name: burst, karpenter: {...}}",
    good="cluster:\n  aws: {clusterName: ml-platform, nodeRole: KarpenterNodeRole-ml-platform}",
)
W_BLIND_CAPACITY = Code(
    "GP615", "Karpenter can never launch a node for shared or MIG units", Severity.ERROR,
    "Karpenter decides what to launch from the instance types' capacity, which knows only the "
    "physical `nvidia.com/gpu`; a pending pod whose request fits no instance type is never "
    "provisioned for (kubernetes-sigs/karpenter@v1.14.1 "
    "pkg/controllers/provisioning/scheduling/scheduler.go:725-760). So a MIG pool whose units have "
    "their own resource name (`nvidia.com/mig-*` under strategy `mixed`), or a time-slicing/MPS pool "
    "whose units are renamed (`nvidia.com/gpu.shared`, `renameByDefault: true`), never gets a node: an "
    "error. No AMI changes that: the instance type's capacity lists `nvidia.com/gpu` only "
    "(aws/karpenter-provider-aws@v1.14.1 pkg/providers/instancetype/types.go:332-349); Bottlerocket's "
    "own time-slicing renames the units on the running node, after the launch decision. "
    "Set `karpenter.nodeOverlay: true` to emit a NodeOverlay with the pool's real capacity (alpha: "
    "Karpenter feature gate `nodeOverlay`). A warning for time-slicing/MPS pools whose units stay "
    "`nvidia.com/gpu` (`renameByDefault: false`) and for MIG pools whose units are all advertised as "
    "`nvidia.com/gpu` (strategy `single`): Karpenter launches for `nvidia.com/gpu` but counts physical GPUs.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}\n"
        "karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16}",
    good="sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}\n"
         "karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, nodeOverlay: true}",
    pain="#19 kubernetes-sigs/karpenter #729, #2140, aws/karpenter-provider-aws #3376; "
         "#20 aws/karpenter-provider-aws PR #8710; #27",
)
W_PARTIAL_NODE = Code(
    "GP617", "maxGPUs is not whole nodes", Severity.WARNING,
    "Karpenter launches whole nodes: a limit that is not a multiple of the GPUs per node is rounded "
    "down to whole nodes (the NodePool limit gpuplan writes), and the remainder is never usable.",
    bad="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 20}   # 8 per node",
    good="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16}",
)
E_LIMIT_BELOW_NODE = Code(
    "GP618", "maxGPUs smaller than one node", Severity.ERROR,
    "`maxGPUs` is smaller than the GPUs of one node: the NodePool limit would forbid every launch.",
    bad="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 4}",
    good="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 8}",
)
W_BOTTLEROCKET_KEY = Code(
    "GP619", "topology setting not carried on Bottlerocket", Severity.WARNING,
    "On Bottlerocket Karpenter re-marshals `[settings.kubernetes]` through its typed settings struct "
    "and drops keys it does not know. gpuplan writes cpu-manager-policy, topology-manager-policy/scope "
    "and topology-manager-policy-options there; `reservedSystemCPUs` is not written (Bottlerocket "
    "reserves kubelet CPU itself). Use AL2023, whose NodeConfig passes kubelet settings through.",
    bad="karpenter: {amiFamily: Bottlerocket, ...}\ntopology: {policy: restricted, reservedSystemCPUs: \"0-1\"}",
    good="karpenter: {amiFamily: AL2023, ...}\ntopology: {policy: restricted, reservedSystemCPUs: \"0-1\"}",
    pain="#21 aws/karpenter-provider-aws #4740, #5559",
)
E_MEMORY_STATIC = Code(
    "GP620", "Static memory manager on a Karpenter pool", Severity.ERROR,
    "`memoryManagerPolicy: Static` needs `reservedMemory` equal, per NUMA node, to the kubelet's "
    "memory reservations plus the hard eviction threshold. On Karpenter nodes those are computed at "
    "boot (nodeadm / Bottlerocket, per instance type), so no fixed `reservedMemory` can match and the "
    "kubelet would not start.",
    bad="karpenter: {...}\ntopology: {policy: single-numa-node, memoryManagerPolicy: Static}",
    good="karpenter: {...}\ntopology: {policy: single-numa-node}",
)

E_EFA_UNSUPPORTED = Code(
    "GP653", "EFA on an instance type without EFA", Severity.ERROR,
    "`karpenter.efa: true` says the pool's multi-node jobs request `vpc.amazonaws.com/efa`. Karpenter "
    "attaches EFA interfaces only to instance types whose EC2 description has EFA (its "
    "`vpc.amazonaws.com/efa` capacity, aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/"
    "instance.go:699-720): a pod that requests it never fits a type without, and stays Pending. Keep only "
    "EFA instance types in the pool (p4d, p4de, p5, p5e, p5en, p6-*, the larger g5/g6/g6e sizes), or turn "
    "EFA off.",
    bad="karpenter: {instanceTypes: [p5.48xlarge, g6e.4xlarge], efa: true, ...}",
    good="karpenter: {instanceTypes: [p5.48xlarge], efa: true, ...}",
)
W_RESERVATION_UNUSED = Code(
    "GP654", "capacity reservations and capacity types disagree", Severity.WARNING,
    "Karpenter launches into a capacity reservation only when the NodePool allows capacity type "
    "`reserved`, and offers `reserved` capacity only from the reservations the EC2NodeClass's "
    "`capacityReservationSelectorTerms` select (aws/karpenter-provider-aws@v1.14.1 pkg/providers/"
    "instancetype/offering/reserved_capacity_resolver.go:67-91, pkg/providers/instancetype/types.go:"
    "171-179). Reservations without `reserved` in `capacityTypes` are never used (you pay for them "
    "idle); `reserved` without reservations never launches a node.",
    bad="karpenter: {capacityTypes: [on-demand], capacityReservations: [{id: cr-0123456789abcdef0}]}",
    good="karpenter: {capacityTypes: [reserved, on-demand], capacityReservations: [{id: cr-0123456789abcdef0}]}",
)

CODES = (
    E_UNKNOWN_TYPE, E_WRONG_GPU, E_GPU_COUNT, W_AMI_LATEST, E_NO_AWS, W_BLIND_CAPACITY,
    W_PARTIAL_NODE, E_LIMIT_BELOW_NODE, W_BOTTLEROCKET_KEY, E_MEMORY_STATIC,
    E_EFA_UNSUPPORTED, W_RESERVATION_UNUSED,
)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    from gpuplan.provisioning.pools import karpenter_cloud

    pools = [pv for pv in rf.pools if pv.pool.karpenter is not None]
    if karpenter_cloud(rf.fleet.spec.cluster) == "azure":
        # AKS Node Auto Provisioning: VM sizes, AWS-only fields, AKS's Karpenter (gpuplan.rules.nap)
        for pv in pools:
            yield from _pool(rf, pv, aws=False)
        return
    if pools and rf.fleet.spec.cluster.aws is None:
        pv = pools[0]
        names = ", ".join(p.name for p in pools)
        yield rf.diag(
            E_NO_AWS,
            f"Karpenter pool(s) {names} need cluster.aws (clusterName, nodeRole) for their EC2NodeClass",
            ("spec", "cluster") if _has(rf, ("spec", "cluster")) else pv.path + ("karpenter",),
            key=True,
            hint="add cluster.aws: {clusterName: <EKS cluster>, nodeRole: <node IAM role>}",
        )
    for pv in pools:
        yield from _instance_types(rf, pv)
        yield from _pool(rf, pv)
        yield from _efa_and_reservations(rf, pv)


def _efa_and_reservations(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.cloud.aws import instance_type

    k = pv.pool.karpenter
    assert k is not None
    kpath = pv.path + ("karpenter",)
    if k.efa:
        without = [n for n in k.instance_types if (it := instance_type(n)) is not None and not it.efa_interfaces]
        if without:
            yield rf.diag(
                E_EFA_UNSUPPORTED,
                f"pool {pv.name!r}: efa is true but {', '.join(without)} take no EFA interface",
                kpath + ("efa",),
                hint="drop those instance types from the pool, or set efa: false",
            )
    reserved = "reserved" in k.capacity_types
    if k.capacity_reservations and not reserved:
        yield rf.diag(
            W_RESERVATION_UNUSED,
            f"pool {pv.name!r}: capacityReservations are set but capacityTypes has no 'reserved'; Karpenter "
            "never launches into them",
            kpath + ("capacityReservations",), key=True,
            hint="add reserved to capacityTypes (Karpenter prefers reserved, then spot, then on-demand)",
        )
    elif reserved and not k.capacity_reservations:
        yield rf.diag(
            W_RESERVATION_UNUSED,
            f"pool {pv.name!r}: capacityTypes has 'reserved' but no capacityReservations; Karpenter has no "
            "reserved capacity to offer",
            kpath + ("capacityTypes",),
            hint="add capacityReservations: [{id: cr-...}] or [{tags: {...}}]",
        )


def _has(rf: ResolvedFleet, path: tuple) -> bool:
    return path in rf.doc.key_pos or path in rf.doc.value_pos


def _instance_types(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.cloud.aws import instance_gpu_model, instance_type, instance_types_for, suggest_instance_types

    k = pv.pool.karpenter
    assert k is not None
    base = pv.path + ("karpenter", "instanceTypes")
    want = pv.gpu
    first_count: tuple[str, int] | None = None
    for j, name in enumerate(k.instance_types):
        it = instance_type(name)
        if it is None:
            sugg = suggest_instance_types(name)
            yield rf.diag(
                E_UNKNOWN_TYPE,
                f"pool {pv.name!r}: {name!r} is not an AWS GPU instance type gpuplan knows",
                base + (j,),
                hint=(f"did you mean {' or '.join(sugg)}?" if sugg else
                      "see the instance types in gpuplan/cloud/data/aws-gpu-instance-types.json"),
            )
            continue
        has = instance_gpu_model(it)
        if want is not None and (has is None or has.key != want.key or not it.gpu_count):
            fits = [t.name for t in instance_types_for(want)]
            if pv.pool.gpus_per_node:
                fits = [n for n in fits if instance_type(n).gpu_count == pv.pool.gpus_per_node] or fits
            model = f" ({has.key})" if has is not None and it.gpu_count else ""
            yield rf.diag(
                E_WRONG_GPU,
                f"pool {pv.name!r} is {want.key} but {name} has {it.describe_gpus()}{model}",
                base + (j,),
                hint=(f"instance types with {want.key}: {', '.join(fits[:6])}" if fits else
                      f"AWS offers no instance type with {want.key}; use a static pool or another GPU"),
            )
            continue
        if not it.gpu_count:
            continue
        if pv.pool.gpus_per_node is not None and it.gpu_count != pv.pool.gpus_per_node:
            yield rf.diag(
                E_GPU_COUNT,
                f"pool {pv.name!r} has gpusPerNode {pv.pool.gpus_per_node} but {name} has {it.describe_gpus()}",
                base + (j,),
                hint=f"use an instance type with {pv.pool.gpus_per_node} GPUs, or set gpusPerNode: {it.gpu_count}",
            )
            continue
        if first_count is None:
            first_count = (name, it.gpu_count)
        elif it.gpu_count != first_count[1]:
            yield rf.diag(
                E_GPU_COUNT,
                f"pool {pv.name!r}: {name} has {it.gpu_count} GPUs but {first_count[0]} has {first_count[1]}; "
                "the instance types of one pool must have the same number of GPUs",
                base + (j,),
                hint="put instance types of different sizes in different pools",
            )


def _pool(rf: ResolvedFleet, pv: PoolView, aws: bool = True) -> Iterator[Diagnostic]:
    k = pv.pool.karpenter
    assert k is not None
    kpath = pv.path + ("karpenter",)
    if aws and k.ami_version == "latest":
        where = kpath + ("amiVersion",) if _has(rf, kpath + ("amiVersion",)) else kpath
        yield rf.diag(
            W_AMI_LATEST,
            f"pool {pv.name!r}: amiVersion latest — every new {k.ami_family} AMI release drifts and replaces "
            "the pool's nodes",
            where, key=where == kpath,
            hint=("pin a release, e.g. amiVersion: v20260714 (AL2023)" if k.ami_family == "AL2023" else
                  "pin a release, e.g. amiVersion: v1.40.0 (Bottlerocket)"),
        )
    gpn = pv.gpus_per_node
    if gpn:
        if k.max_gpus < gpn:
            yield rf.diag(
                E_LIMIT_BELOW_NODE,
                f"pool {pv.name!r}: maxGPUs {k.max_gpus} is less than one node ({gpn} GPUs); Karpenter could "
                "never launch a node",
                kpath + ("maxGPUs",),
                hint=f"set maxGPUs to a multiple of {gpn}",
            )
        elif k.max_gpus % gpn:
            whole = (k.max_gpus // gpn) * gpn
            yield rf.diag(
                W_PARTIAL_NODE,
                f"pool {pv.name!r}: maxGPUs {k.max_gpus} is not a multiple of {gpn} GPUs per node; the "
                f"NodePool limit is {whole} ({k.max_gpus // gpn} nodes)",
                kpath + ("maxGPUs",),
                hint=f"set maxGPUs: {whole} or {whole + gpn}",
            )
    s = pv.pool.sharing
    if s.mode != "exclusive":
        res = pv.node_resources()
        hidden = {r: v for r, v in res.items() if r != GPU}
        if not k.node_overlay and hidden:
            # the instance type's capacity is all Karpenter fits a pod's requests against: on AWS
            # it offers nvidia.com/gpu and never a renamed unit, whatever the AMI (Bottlerocket's
            # own time-slicing renames it only on the running node): aws/karpenter-provider-aws
            # v1.14.1 pkg/providers/instancetype/types.go:332-349; kubernetes-sigs/karpenter
            # v1.14.1 pkg/controllers/provisioning/scheduling/nodeclaim.go:624-635,
            # pkg/utils/resources/resources.go:188-201
            how = "partitions GPUs by MIG" if s.mode == "mig" else f"shares GPUs by {s.mode} under their own name"
            yield rf.diag(
                W_BLIND_CAPACITY,
                f"pool {pv.name!r} {how}: Karpenter knows only the physical nvidia.com/gpu "
                f"of the instance type, so pods that ask for {', '.join(sorted(hidden))} never get a node "
                f"launched (the pool's nodes advertise {', '.join(f'{r}: {v}' for r, v in res.items())})",
                kpath,
                key=True,
                hint="set karpenter.nodeOverlay: true (needs Karpenter's alpha nodeOverlay feature gate)"
                + ("" if s.mode == "mig" else ", or renameByDefault: false so the pods ask for nvidia.com/gpu"),
            )
        elif not k.node_overlay and res:
            yield rf.diag(
                W_BLIND_CAPACITY,
                f"pool {pv.name!r} shares GPUs by {s.mode}; Karpenter counts only the physical nvidia.com/gpu "
                f"of the instance type and cannot see {', '.join(f'{r}: {v}' for r, v in res.items())} per node",
                kpath,
                key=True,
                hint="set karpenter.nodeOverlay: true (needs Karpenter's alpha nodeOverlay feature gate)",
                severity=Severity.WARNING,
            )
    t = pv.pool.topology
    if k.ami_family == "Bottlerocket" and t.reserved_system_cpus is not None:
        yield rf.diag(
            W_BOTTLEROCKET_KEY,
            f"pool {pv.name!r}: reservedSystemCPUs is not passed to Bottlerocket nodes by Karpenter's settings "
            "struct; gpuplan does not write it",
            pv.path + ("topology", "reservedSystemCPUs"),
            hint="use amiFamily AL2023, or drop reservedSystemCPUs (Bottlerocket reserves kubelet CPU itself)",
        )
    if t.memory_manager_policy == "Static":
        yield rf.diag(
            E_MEMORY_STATIC,
            f"pool {pv.name!r}: memoryManagerPolicy Static needs a reservedMemory that matches the memory "
            "nodeadm/Bottlerocket reserve at boot; gpuplan cannot write one for Karpenter nodes",
            pv.path + ("topology", "memoryManagerPolicy"),
            hint="drop memoryManagerPolicy on Karpenter pools",
        )
