"""GP601-GP609: topology feasibility — will the kubelet admit what the tiers ask for?

The facts, from reference/k8s/facts.md §f and the kubelet's Topology Manager:

* the device manager offers a NUMA hint for every set of NUMA nodes that holds
  enough free GPUs, and marks *preferred* the hints whose size equals the
  smallest number of NUMA nodes that could ever hold the request;
* ``single-numa-node`` admits a pod (scope ``pod``) or container (scope
  ``container``) only with a preferred single-NUMA hint: a request for more
  GPUs than one NUMA node holds is rejected at admission with
  ``TopologyAffinityError``; the pod fails and is not rescheduled;
* ``restricted`` admits any *preferred* hint. For 8 GPUs on a 4+4 node the
  narrowest possible mask is both NUMA nodes, and that mask is preferred: the
  pod is admitted, spanning two NUMA nodes. (``restricted`` does reject a pod
  whose GPUs *could* fit one NUMA node when the free GPUs happen to be spread
  over two — fragmentation the scheduler cannot see; docs/karpenter.md.)
* CPUs are aligned only with ``cpuManagerPolicy: static`` (Guaranteed pods,
  integer CPU requests); the policy then needs a non-zero CPU reservation.

Where the facts come from, best first: the node inventory of a static pool's
nodes (``gpuplan.probe.facts``); the instance type of a Karpenter pool
(``gpuplan.cloud.aws``, NUMA layout inferred); the pool's ``interconnect``;
the GPU model (SXM/HGX parts have NVLink, 8-GPU HGX boards are split 4+4
across two sockets; PCIe parts have no NVLink unless bridged).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import PoolView, ResolvedFleet

E_POD_TOO_BIG = Code(
    "GP601", "pods larger than a node", Severity.ERROR,
    "A tier's `maxGPUsPerPod` is larger than what one node of its pool advertises. The scheduler "
    "places a pod on one node, so such a pod stays Pending forever — and a Karpenter pool cannot "
    "launch a node that would fit it.",
    bad="pools:\n  - {name: infer, gpu: L40S, karpenter: {instanceTypes: [g6e.12xlarge], maxGPUs: 16}}\n"
        "tiers:\n  - {name: big, pool: infer, maxGPUsPerPod: 8}   # g6e.12xlarge has 4 GPUs",
    good="tiers:\n  - {name: big, pool: infer, maxGPUsPerPod: 4}",
)
E_SINGLE_NUMA = Code(
    "GP602", "pods larger than a NUMA node under single-numa-node", Severity.ERROR,
    "With Topology Manager policy `single-numa-node` the kubelet admits a pod (scope `pod`) only if "
    "all its GPUs sit on one NUMA node. A tier that asks for more GPUs than one NUMA node holds "
    "(e.g. 8 GPUs on a 2-socket HGX node with 4 GPUs per socket) is rejected at admission with "
    "TopologyAffinityError, and the failed pod is not rescheduled. With scope `container` the limit "
    "applies per container (a warning: pods may split GPUs across containers).",
    bad="pools:\n  - name: train\n    gpu: H100-SXM5-80GB\n    karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 64}\n"
        "    topology: {policy: single-numa-node, scope: pod}\n"
        "tiers:\n  - {name: training, pool: train, maxGPUsPerPod: 8}",
    good="    topology: {policy: restricted, scope: pod}   # admits the narrowest mask: both NUMA nodes",
    pain="#21 kubernetes-sigs/karpenter #1078 (topology policies set by hand, found on the node)",
)
I_RESTRICTED_SPANS = Code(
    "GP603", "pods span NUMA nodes under restricted", Severity.INFO,
    "With `restricted` a pod that needs more GPUs than one NUMA node holds is admitted: the "
    "narrowest NUMA mask that can hold it (e.g. both sockets for 8 GPUs on a 4+4 node) is a "
    "preferred hint. Its GPUs and CPUs then span NUMA nodes; that is expected for whole-node "
    "training, and the reason `single-numa-node` would reject the same pod.",
    bad="topology: {policy: restricted, scope: pod}\n# tier maxGPUsPerPod: 8 on p5.48xlarge (4 GPUs per NUMA node)",
    good="# informational: nothing to change for whole-node training",
)
E_NO_NVLINK = Code(
    "GP604", "NVLink required on a pool without NVLink", Severity.ERROR,
    "A tier sets `requiresNVLink: true` but its pool's GPUs talk over PCIe only (from the node "
    "inventory, the instance type, the pool's `interconnect`, or the GPU model: PCIe boards such "
    "as L40S, L4, T4, A10G and *-PCIE parts have no NVLink unless bridged). MIG instances have no "
    "NVLink peer access at all.",
    bad="pools:\n  - {name: infer, gpu: L40S, karpenter: {instanceTypes: [g6e.12xlarge], maxGPUs: 8}}\n"
        "tiers:\n  - {name: training, pool: infer, requiresNVLink: true}",
    good="pools:\n  - {name: train, gpu: H100-SXM5-80GB, karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16}}\n"
         "tiers:\n  - {name: training, pool: train, requiresNVLink: true}",
)
W_NO_CPU_ALIGN = Code(
    "GP605", "Topology Manager without CPU alignment", Severity.WARNING,
    "A Topology Manager policy other than `none` with `cpuManagerPolicy: none` aligns only "
    "devices: the pod's CPUs float over every socket, so the GPU-to-CPU locality the policy is "
    "meant to give is lost (and `restricted`/`single-numa-node` still reject pods on device hints). "
    "Leave `cpuManagerPolicy` unset (gpuplan then sets `static`) or set it to `static`.",
    bad="topology: {policy: single-numa-node, cpuManagerPolicy: none}",
    good="topology: {policy: single-numa-node}   # cpuManagerPolicy defaults to static",
    pain="#21 aws/karpenter-provider-aws #4740 (cpuManagerPolicy/topology policy combos)",
)
W_TRAINING_SHARED = Code(
    "GP606", "training tier on time-sliced or MPS GPUs", Severity.WARNING,
    "Time-slicing and MPS hand out replicas of a GPU: no memory isolation (one job's OOM or "
    "fault hits its neighbours) and no more compute than one GPU. A training tier there gets "
    "unpredictable step times (a warning). A tier that allows more than one GPU per pod is an "
    "error: a multi-GPU pod is either rejected at admission (`failRequestsGreaterThanOne: true`) "
    "or given several replicas that may be the same physical GPU.",
    bad="pools:\n  - {name: dev, sharing: {mode: time-slicing, replicas: 4}, ...}\n"
        "tiers:\n  - {name: training, pool: dev, workload: training, maxGPUsPerPod: 4}",
    good="tiers:\n  - {name: training, pool: train-a100, workload: training, maxGPUsPerPod: 4}  # exclusive pool",
    pain="#25 NVIDIA/gpu-operator #386 (time-sliced replicas land on the same GPU)",
)
W_STATIC_NO_RESERVE = Code(
    "GP607", "static CPU manager without a CPU reservation", Severity.WARNING,
    "`cpuManagerPolicy: static` (the default when a Topology Manager policy is set) needs a "
    "non-zero CPU reservation; without one the kubelet does not start (\"the static policy "
    "requires systemreserved.cpu + kubereserved.cpu to be greater than zero\"). The drop-in for a "
    "static pool sets `reservedSystemCPUs` only when `topology.reservedSystemCPUs` is given; "
    "otherwise the node's base kubelet configuration must reserve CPU. (Karpenter pools need "
    "nothing: nodeadm and Bottlerocket always reserve CPU for the kubelet.)",
    bad="pools:\n  - {name: train, nodes: [gpu-1], topology: {policy: restricted}, ...}",
    good="pools:\n  - {name: train, nodes: [gpu-1], topology: {policy: restricted, reservedSystemCPUs: \"0,1\"}, ...}",
)
W_MEMORY_STATIC = Code(
    "GP608", "Static memory manager needs reservedMemory", Severity.WARNING,
    "`memoryManagerPolicy: Static` makes the kubelet refuse to start unless `reservedMemory` "
    "(per NUMA node) equals kubeReserved + systemReserved + the hard eviction threshold for "
    "memory. fleet.yaml cannot state the node's reservations, so the drop-in does not set "
    "`reservedMemory`: the node's base configuration must.",
    bad="topology: {policy: single-numa-node, memoryManagerPolicy: Static}",
    good="topology: {policy: single-numa-node}   # or Static with reservedMemory in the base config",
)

E_CPU_LIST = Code(
    "GP609", "reservedSystemCPUs is not a CPU list", Severity.ERROR,
    "`reservedSystemCPUs` is a Linux cpuset list (`0,1`, `0-3`, `0-1,56-57`); the kubelet refuses "
    "anything else at start-up.",
    bad='topology: {policy: restricted, reservedSystemCPUs: "cpu0 cpu1"}',
    good='topology: {policy: restricted, reservedSystemCPUs: "0,1"}',
)

E_CPUS_OFFLINE = Code(
    "GP627", "reserved CPUs the node does not have", Severity.ERROR,
    "The kubelet refuses to start when `reservedSystemCPUs` names CPUs that are not online on the "
    "node: on a Karpenter pool every instance type's vCPUs are numbered 0 to vCPUs-1, and a node "
    "whose kubelet does not start is launched and terminated again and again. On a static pool each "
    "inventoried node's online CPUs (`system.onlineCpus`, recorded by `gpuplan probe`) are checked; "
    "nodes whose inventory predates that field are not checked.",
    bad='karpenter: {instanceTypes: [g6e.xlarge], ...}   # 4 vCPUs\ntopology: {policy: restricted, reservedSystemCPUs: "0-7"}',
    good='karpenter: {instanceTypes: [g6e.xlarge], ...}\ntopology: {policy: restricted, reservedSystemCPUs: "0"}',
)
E_NO_CPUS_LEFT = Code(
    "GP628", "no CPUs left for pods", Severity.ERROR,
    "`reservedSystemCPUs` takes every CPU of the node for the system: nothing is allocatable to pods "
    "(and with the static CPU manager no CPU is left for the shared pool the kubelet requires).",
    bad='karpenter: {instanceTypes: [g6e.xlarge], ...}   # 4 vCPUs\ntopology: {reservedSystemCPUs: "0-3"}',
    good='karpenter: {instanceTypes: [g6e.xlarge], ...}\ntopology: {reservedSystemCPUs: "0"}',
)

E_NVLINK_CLAIM = Code(
    "GP629", "interconnect nvlink on a GPU without NVLink", Severity.ERROR,
    "`interconnect: nvlink` on a GPU model whose board has no NVLink connector at all (T4, A10, A10G, "
    "L4, L40, L40S, V100 PCIe, RTX PRO Blackwell): no bridge can add it, so `requiresNVLink` tiers "
    "would be admitted on GPUs that talk over PCIe only.",
    bad="pools:\n  - {name: infer, gpu: L40S, interconnect: nvlink, ...}",
    good="pools:\n  - {name: infer, gpu: L40S, interconnect: pcie, ...}",
)

CODES = (
    E_POD_TOO_BIG, E_SINGLE_NUMA, I_RESTRICTED_SPANS, E_NO_NVLINK, W_NO_CPU_ALIGN,
    W_TRAINING_SHARED, W_STATIC_NO_RESERVE, W_MEMORY_STATIC, E_CPU_LIST, E_CPUS_OFFLINE, E_NO_CPUS_LEFT,
    E_NVLINK_CLAIM,
)

# Boards without any NVLink connector (NVIDIA product datasheets: the PCIe A100/H100/A30/A40/A800
# take an NVLink bridge, these do not), so `interconnect: nvlink` cannot be true for them.
NO_NVLINK_BOARDS = frozenset((
    "T4", "A10", "A10G", "L4", "L40", "L40S", "V100-PCIE-16GB", "V100-PCIE-32GB",
    "RTX-PRO-6000-BLACKWELL-SERVER", "RTX-PRO-6000-BLACKWELL-WS", "RTX-PRO-6000-BLACKWELL-MAXQ",
    "RTX-PRO-5000-BLACKWELL",
))

_GO_INT = re.compile(r"[+-]?[0-9]+\Z")  # strconv.Atoi (base 10, optional sign)
_INT64_MAX = 2**63 - 1


def parse_cpuset(text: str) -> list[tuple[int, int]]:
    """Parse a CPU list as the kubelet does (k8s.io/utils/cpuset ``Parse``, used for
    ``reservedSystemCPUs``): ``,``-separated elements, each ``N`` or ``A-B`` split at
    the first ``-``, every number a Go ``strconv.Atoi`` int, and ``A <= B``. Returns
    the ranges, merged and sorted (never expanded: ``0-999999999`` costs nothing).
    Raises ``ValueError`` with the kubelet's reason."""
    ranges: list[tuple[int, int]] = []
    for element in text.split(","):
        bounds = element.split("-", 1)
        nums = []
        for b in bounds:
            if not _GO_INT.match(b) or len(b) > 20 or abs(int(b)) > _INT64_MAX:
                raise ValueError(f"{b!r} in {element!r} is not an integer")
            nums.append(int(b))
        start, end = nums[0], nums[-1]
        if start > end:
            raise ValueError(f"invalid range {element!r} ({start} > {end})")
        if start < 0:
            raise ValueError(f"CPU ids are never negative ({element!r})")
        ranges.append((start, end))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged

# GPU models on HGX/SXM boards (NVLink / NVSwitch between every pair).
_NVLINK_KEYS = ("B200", "B300", "GB200", "GB300")


@dataclass(frozen=True)
class PoolTopology:
    """What is known about one pool's node topology, and from where."""

    gpus_per_numa: int | None
    numa_source: str
    nvlink: bool | None
    nvlink_source: str


def model_nvlink(key: str) -> bool | None:
    k = key.upper()
    if "SXM" in k or k in _NVLINK_KEYS or k.startswith("GH200"):
        return True
    if "NVL" in k:  # H100/H200 NVL: NVLink bridges between pairs only
        return None
    return False


def _pool_inventory(rf: ResolvedFleet, pv: PoolView) -> list:
    nodes = set(pv.pool.nodes or ())
    return [inv for inv in rf.inventory if inv.metadata.name in nodes and inv.gpus]


def pool_topology(rf: ResolvedFleet, pv: PoolView) -> PoolTopology:
    numa: int | None = None
    numa_src = ""
    nvl: bool | None = None
    nvl_src = ""
    invs = _pool_inventory(rf, pv)
    if invs:
        from gpuplan.probe.facts import node_facts

        facts = sorted((node_facts(inv) for inv in invs), key=lambda f: f.node)
        known = [f for f in facts if f.max_gpus_per_numa]
        if known:
            worst = min(known, key=lambda f: f.max_gpus_per_numa)
            numa, numa_src = worst.max_gpus_per_numa, f"inventory of node {worst.node}"
        pcie = [f for f in facts if f.all_pairs_nvlink is False]
        if pcie:
            nvl, nvl_src = False, f"inventory of node {pcie[0].node} ({pcie[0].interconnect} GPU paths)"
        elif facts and all(f.all_pairs_nvlink for f in facts):
            nvl, nvl_src = True, "inventory"
    k = pv.pool.karpenter
    if k is not None:
        from gpuplan.cloud.aws import instance_type

        its = [it for it in (instance_type(n) for n in k.instance_types) if it is not None and it.gpu_count]
        if its and numa is None:
            worst_it = min(its, key=lambda it: it.gpus_per_numa_node)
            numa, numa_src = worst_it.gpus_per_numa_node, f"instance type {worst_it.name}"
        if its and nvl is None and pv.pool.interconnect is None:
            bad = [it for it in its if not it.nvlink]
            if bad:
                nvl, nvl_src = False, f"instance type {bad[0].name} (PCIe only)"
            else:
                nvl, nvl_src = True, "instance type"
    if nvl is None and pv.gpu is not None and pv.gpu.key in NO_NVLINK_BOARDS:
        nvl, nvl_src = False, f"GPU model {pv.gpu.key} (no NVLink on the board)"
    if nvl is None and pv.pool.interconnect is not None:
        nvl, nvl_src = pv.pool.interconnect == "nvlink", f"interconnect: {pv.pool.interconnect}"
    if pv.gpu is not None:
        sxm = model_nvlink(pv.gpu.key)
        if nvl is None and sxm is not None:
            nvl, nvl_src = sxm, f"GPU model {pv.gpu.key}" + ("" if sxm else " (PCIe)")
        if numa is None and sxm and pv.gpus_per_node == 8:
            numa, numa_src = 4, f"GPU model {pv.gpu.key} (8-GPU HGX board: 4 GPUs per socket)"
    return PoolTopology(numa, numa_src, nvl, nvl_src)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    topo = {pv.name: pool_topology(rf, pv) for pv in rf.pools}
    for i, tier in enumerate(rf.fleet.spec.tiers):
        pv = rf.tier_pool(tier)
        if pv is None:
            continue
        yield from _tier(rf, i, tier, pv, topo[pv.name])
    for pv in rf.pools:
        yield from _pool(rf, pv)


def _tier(rf: ResolvedFleet, i: int, tier, pv: PoolView, pt: PoolTopology) -> Iterator[Diagnostic]:
    tpath = ("spec", "tiers", i)
    n = tier.max_gpus_per_pod
    mode = pv.pool.sharing.mode
    t = pv.pool.topology
    if n is not None:
        res = rf.tier_resource(tier)
        per_node = pv.node_resources().get(res) if res else None
        if per_node is not None and n > per_node:
            what = "GPUs" if mode == "exclusive" else f"units of {res}"
            yield rf.diag(
                E_POD_TOO_BIG,
                f"tier {tier.name!r} allows {n} GPUs per pod but a node of pool {pv.name!r} has {per_node} "
                f"{what}; such pods stay Pending forever",
                tpath + ("maxGPUsPerPod",),
                hint=f"lower maxGPUsPerPod to {per_node}, or use a pool whose nodes have at least {n}",
            )
        elif mode == "exclusive" and pt.gpus_per_numa and n > pt.gpus_per_numa:
            span = -(-n // pt.gpus_per_numa)
            if t.policy == "single-numa-node":
                pod = t.scope == "pod"
                yield rf.diag(
                    E_SINGLE_NUMA,
                    f"tier {tier.name!r} allows {n} GPUs per pod; pool {pv.name!r} has {pt.gpus_per_numa} GPUs "
                    f"per NUMA node ({pt.numa_source}) and Topology Manager policy single-numa-node: "
                    + ("such a pod is rejected at admission (TopologyAffinityError) and not rescheduled"
                       if pod else
                       f"a container asking for more than {pt.gpus_per_numa} GPUs is rejected at admission "
                       "(TopologyAffinityError)"),
                    tpath + ("maxGPUsPerPod",),
                    hint=f"use policy restricted (admits the narrowest mask, {span} NUMA nodes) or limit "
                         f"maxGPUsPerPod to {pt.gpus_per_numa}",
                    severity=None if pod else Severity.WARNING,
                )
            elif t.policy == "restricted":
                yield rf.diag(
                    I_RESTRICTED_SPANS,
                    f"tier {tier.name!r}: a pod with {n} GPUs spans {span} NUMA nodes of pool {pv.name!r} "
                    f"({pt.gpus_per_numa} GPUs per NUMA node, {pt.numa_source}); policy restricted admits it "
                    "because that is the narrowest possible mask",
                    tpath + ("maxGPUsPerPod",),
                    hint="nothing to change; single-numa-node would reject these pods",
                )
    if tier.requires_nvlink:
        if mode == "mig":
            yield rf.diag(
                E_NO_NVLINK,
                f"tier {tier.name!r} requires NVLink but pool {pv.name!r} hands out MIG instances, which have "
                "no NVLink peer access",
                tpath + ("requiresNVLink",),
                hint="put the tier on a pool of whole GPUs on an NVLink/NVSwitch board",
            )
        elif pt.nvlink is False:
            yield rf.diag(
                E_NO_NVLINK,
                f"tier {tier.name!r} requires NVLink but the GPUs of pool {pv.name!r} are connected over PCIe "
                f"only ({pt.nvlink_source})",
                tpath + ("requiresNVLink",),
                hint="use a pool of SXM/HGX GPUs (e.g. p4d, p4de, p5 instance types) or drop requiresNVLink",
            )
    if tier.workload == "training" and mode in ("time-slicing", "mps"):
        multi = n is None or n > 1
        yield rf.diag(
            W_TRAINING_SHARED,
            f"training tier {tier.name!r} is on pool {pv.name!r}, which shares GPUs by {mode}: no memory "
            "isolation, one GPU's compute"
            + (f"; and pods with more than one GPU (maxGPUsPerPod {n if n is not None else 'unset'}) cannot "
               "get distinct physical GPUs" if multi else ""),
            tpath + ("pool",),
            hint="put training on an exclusive (or MIG) pool" + ("" if n is not None else
                                                                 ", or set maxGPUsPerPod: 1"),
            severity=Severity.ERROR if multi else None,
        )


def _pool(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.identity import effective_cpu_manager_policy

    t = pv.pool.topology
    tpath = pv.path + ("topology",)
    cpu = effective_cpu_manager_policy(t)
    if t.reserved_system_cpus is not None:
        yield from _reserved_cpus(rf, pv, t.reserved_system_cpus)
    if pv.pool.interconnect == "nvlink" and pv.gpu is not None and pv.gpu.key in NO_NVLINK_BOARDS:
        yield rf.diag(
            E_NVLINK_CLAIM,
            f"pool {pv.name!r}: {pv.gpu.key} boards have no NVLink; their GPUs talk over PCIe only",
            pv.path + ("interconnect",),
            hint="set interconnect: pcie (or leave it out)",
        )
    if t.policy != "none" and t.cpu_manager_policy == "none":
        yield rf.diag(
            W_NO_CPU_ALIGN,
            f"pool {pv.name!r}: Topology Manager policy {t.policy} with cpuManagerPolicy none aligns GPUs "
            "but not CPUs",
            tpath + ("cpuManagerPolicy",),
            hint="remove cpuManagerPolicy (defaults to static) or set it to static",
        )
    dropin = pv.pool.is_static or pv.pool.capi is not None  # the kubelet drop-in (a Cluster API bootstrap file too)
    if dropin and cpu == "static" and t.reserved_system_cpus is None:
        why = "set explicitly" if t.cpu_manager_policy == "static" else f"the default with policy {t.policy}"
        yield rf.diag(
            W_STATIC_NO_RESERVE,
            f"pool {pv.name!r}: cpuManagerPolicy static ({why}) needs a CPU reservation, and the kubelet "
            "drop-in sets none; the kubelet will not start unless the node's base configuration reserves CPU",
            tpath + ("cpuManagerPolicy",) if t.cpu_manager_policy else tpath + ("policy",),
            hint='set topology.reservedSystemCPUs (e.g. "0,1"), or disable GP607 with a reason if the '
                 "base kubelet config reserves CPU",
        )
    if dropin and t.memory_manager_policy == "Static":
        yield rf.diag(
            W_MEMORY_STATIC,
            f"pool {pv.name!r}: memoryManagerPolicy Static needs reservedMemory in the node's base kubelet "
            "configuration (kubeReserved + systemReserved + eviction threshold, per NUMA node)",
            tpath + ("memoryManagerPolicy",),
            hint="make sure the base config has reservedMemory, or drop memoryManagerPolicy",
        )


def _reserved_cpus(rf: ResolvedFleet, pv: PoolView, text: str) -> Iterator[Diagnostic]:
    where = pv.path + ("topology", "reservedSystemCPUs")
    try:
        ranges = parse_cpuset(text) if text else None
    except ValueError as exc:
        ranges, why = None, str(exc)
    else:
        why = "it is empty"
    if not ranges:
        yield rf.diag(
            E_CPU_LIST,
            f"pool {pv.name!r}: reservedSystemCPUs {text!r} is not a CPU list the kubelet parses: {why}",
            where,
            hint='write CPU ids and ascending ranges separated by commas, e.g. "0,1" or "0-1,56-57"',
        )
        return
    k = pv.pool.karpenter
    if k is None:
        yield from _reserved_vs_inventory(rf, pv, text, ranges, where)
        return
    from gpuplan.cloud.aws import instance_type

    count = sum(b - a + 1 for a, b in ranges)
    highest = ranges[-1][1]
    its = sorted((it for it in (instance_type(n) for n in k.instance_types) if it is not None and it.cpu),
                 key=lambda it: (it.cpu, it.name))
    if not its:
        return
    small = its[0]
    if highest >= small.cpu:
        yield rf.diag(
            E_CPUS_OFFLINE,
            f"pool {pv.name!r}: reservedSystemCPUs {text!r} names CPU {highest}, but {small.name} has "
            f"{small.cpu} vCPUs (0-{small.cpu - 1}); the kubelet refuses to start",
            where,
            hint=f"reserve CPUs below {small.cpu}, e.g. \"0\"" + (
                f", or drop {small.name} from instanceTypes" if len(its) > 1 else ""),
        )
    elif count >= small.cpu:
        yield rf.diag(
            E_NO_CPUS_LEFT,
            f"pool {pv.name!r}: reservedSystemCPUs {text!r} reserves all {small.cpu} vCPUs of {small.name}; "
            "no CPU is left for pods",
            where,
            hint=f"reserve at most {max(small.cpu // 8, 1)} of the {small.cpu} vCPUs, e.g. \"0\"",
        )


def _first_missing(cpus: list[tuple[int, int]], online: list[tuple[int, int]]) -> int | None:
    """The lowest CPU of ``cpus`` not in ``online`` (both merged, sorted ranges)."""
    for a, b in cpus:
        cur = a
        for x, y in online:
            if y < cur or x > cur:
                continue
            cur = y + 1  # merged ranges: at most one holds ``cur``
            if cur > b:
                break
        if cur <= b:
            return cur
    return None


def _reserved_vs_inventory(rf: ResolvedFleet, pv: PoolView, text: str, ranges: list[tuple[int, int]],
                           where: tuple) -> Iterator[Diagnostic]:
    """Static nodes: the kubelet refuses to start when reservedSystemCPUs is not a subset of
    the CPUs of its machine topology (kubernetes cmd/kubelet/app/server.go getReservedCPUs:
    cpuset.Parse, then "reserved-cpus: %s is not a subset of online-cpus: %s" against the CPUs
    of topology.Discover(cAdvisor machine info), the online CPUs as sysfs lists them); the
    inventory records that list as system.onlineCpus. Nodes inventoried before it was recorded are skipped.
    One check per distinct CPU list: a fleet of identical nodes costs one."""
    nodes = set(pv.pool.nodes or ())
    by_list: dict[str, list[str]] = {}
    for inv in rf.inventory:
        if inv.metadata.name in nodes and inv.system.online_cpus:
            by_list.setdefault(inv.system.online_cpus, []).append(inv.metadata.name)
    count = sum(b - a + 1 for a, b in ranges)
    for cpus, names in sorted(by_list.items()):
        try:
            online = parse_cpuset(cpus)
        except ValueError:
            continue  # the inventory model admits only CPU lists; nothing to compare against
        names.sort()
        who = f"node {names[0]}" + (f" (and {len(names) - 1} more with the same CPUs)" if len(names) > 1 else "")
        total = sum(b - a + 1 for a, b in online)
        missing = _first_missing(ranges, online)
        if missing is not None:
            yield rf.diag(
                E_CPUS_OFFLINE,
                f"pool {pv.name!r}: reservedSystemCPUs {text!r} names CPU {missing}, which is not online on "
                f"{who} (online CPUs {cpus}, from its inventory); the kubelet refuses to start",
                where,
                hint=f"reserve only online CPUs of {names[0]} ({cpus}), e.g. \"{online[0][0]}\"",
            )
        elif count >= total:
            yield rf.diag(
                E_NO_CPUS_LEFT,
                f"pool {pv.name!r}: reservedSystemCPUs {text!r} reserves all {total} online CPUs of {who} "
                f"({cpus}); no CPU is left for pods",
                where,
                hint=f"reserve at most {max(total // 8, 1)} of the {total} CPUs, e.g. \"{online[0][0]}\"",
            )
