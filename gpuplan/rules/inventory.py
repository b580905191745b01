"""GP710-GP719: the fleet spec against the hardware inventory.

Runs only when the spec lists inventory files (``spec.inventory``) and they
hold at least one node. GP701-GP707 (reading the files) are the probe's
(``gpuplan.probe.codes``). Facts come from ``gpuplan.probe.facts``; a fact the
probe could not read stays unknown and its rule is skipped for that GPU.
Diagnostics point at the spec line that names the node (``pools[i].nodes[j]``).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.spec.models import Mig

W_NODE_MISSING = Code(
    "GP710", "static node has no inventory", Severity.WARNING,
    "A node listed in a static pool has no inventory document, so its GPUs cannot be checked "
    "against the pool (run the node probe and `gpuplan inventory pull`). A warning, not an "
    "error, so that a pool can name a node before it is racked; `--strict` fails on it.",
    bad="pools:\n  - {name: train, nodes: [gpu-01, gpu-09]}   # inventory has gpu-01 only",
    good="gpuplan inventory pull -o inventory/   # gpu-09 now has inventory/gpu-09.yaml",
)
E_HARDWARE_MISMATCH = Code(
    "GP711", "node hardware differs from its pool", Severity.ERROR,
    "The inventory says the node has a different GPU model or a different number of GPUs than "
    "its pool declares. MIG profile names and sizes are per model (a layout valid on A100-SXM4-80GB "
    "fails on A100-PCIE-40GB), and capacity and quotas are computed from the pool.",
    bad="pools:\n  - {name: train-a100, gpu: A100-SXM4-80GB, gpusPerNode: 4, nodes: [gpu-a100-03]}\n"
        "# inventory/gpu-a100-03.yaml: 2x NVIDIA A100 80GB PCIe",
    good="move gpu-a100-03 to a pool with gpu: A100-PCIE-80GB, gpusPerNode: 2",
    pain="#1 NVIDIA/gpu-operator #262 (profile invalid on the PCIe board); #4 NVIDIA/mig-parted #157",
)
E_MIG_UNSUPPORTED = Code(
    "GP712", "node cannot create the pool's MIG layout", Severity.ERROR,
    "The pool uses MIG but a GPU of the node reports no MIG capability, or does not offer a "
    "profile of the layout (NVML's profile list on that GPU and driver). mig-parted would fail "
    "or silently do nothing on the node.",
    bad="pools:\n  - {name: infer, gpu: A100-SXM4-80GB, sharing: {mode: mig, ...}, nodes: [gpu-t4-01]}",
    good="pools:\n  - {name: infer, gpu: A100-SXM4-80GB, sharing: {mode: mig, ...}, nodes: [gpu-a100-05]}",
    pain="#25 (mig-parted silently no-ops on unsupported GPU); #6 NVIDIA/mig-parted #189",
)
E_UNKNOWN_HARDWARE = Code(
    "GP713", "inventory GPU not in the catalog", Severity.ERROR,
    "A GPU of a pool's node has a PCI device id and name gpuplan's catalog does not know, so its "
    "MIG profiles and sizes cannot be checked. Update gpuplan, or move the node out of the pool.",
    bad="# inventory: pci.deviceId 0x9999, name 'NVIDIA Prototype'",
    good="# inventory: pci.deviceId 0x20B2, name 'NVIDIA A100-SXM4-80GB'",
    pain="#25 (hard error on unknown PCI IDs)",
)
I_RECONFIGURE = Code(
    "GP714", "node will be reconfigured", Severity.INFO,
    "The MIG state on the node (from its inventory) differs from what the pool declares: "
    "mig-manager will change it after the sync, which drains the node's GPU workloads first.",
    bad="# inventory: GPU 0 has 7x 1g.10gb; pool layout {3g.40gb: 2}",
    good="# expected when the layout changes on purpose; plan the drain",
    pain="#5 NVIDIA/mig-parted #485 (nodes stuck in paused-for-mig-change)",
)
I_UNASSIGNED = Code(
    "GP715", "inventory node in no pool", Severity.INFO,
    "The inventory has a node that no static pool lists: its GPUs get no sharing config, labels or "
    "quotas from gpuplan.",
    bad="# inventory/gpu-spare-01.yaml exists; no pool lists gpu-spare-01",
    good="pools:\n  - {name: spare, nodes: [gpu-spare-01], ...}",
)

CODES = (W_NODE_MISSING, E_HARDWARE_MISMATCH, E_MIG_UNSUPPORTED, E_UNKNOWN_HARDWARE, I_RECONFIGURE,
         I_UNASSIGNED)


def _fmt_layout(layout: dict[str, int] | None) -> str:
    if layout is None:
        return "MIG disabled"
    if not layout:
        return "MIG on with no instances"
    return "{" + ", ".join(f"{k}: {v}" for k, v in layout.items()) + "}"


def _hardware(facts) -> str:
    from gpuplan.catalog import get_gpu

    parts = []
    for key, n in facts.model_counts.items():
        try:
            name = get_gpu(key).smi_name
        except KeyError:
            name = key
        parts.append(f"{n}× {name}")
    return " + ".join(parts) or "no GPUs"


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    if not rf.inventory:
        return
    from gpuplan.probe.facts import node_facts

    facts = {inv.metadata.name: (inv, node_facts(inv)) for inv in rf.inventory}
    listed: set[str] = set()
    for pv in rf.pools:
        for j, node in enumerate(pv.pool.nodes or ()):
            listed.add(node)
            path = pv.path + ("nodes", j)
            if node not in facts:
                yield rf.diag(W_NODE_MISSING,
                              f"node {node} of pool {pv.name!r} has no inventory",
                              path, hint="run the node probe on it and `gpuplan inventory pull`")
                continue
            inv, f = facts[node]
            yield from _node(rf, pv, node, inv, f, path)
    for name in sorted(set(facts) - listed):
        inv, f = facts[name]
        models = set(f.models.values())
        if any(pv.pool.karpenter is not None and pv.gpu is not None and models == {pv.gpu.key} for pv in rf.pools):
            continue  # most likely a node Karpenter launched for a pool of that model
        yield rf.diag(I_UNASSIGNED,
                      f"inventory node {name} ({_hardware(f)}) is in no pool",
                      ("spec", "inventory"), key=True,
                      hint="add it to a static pool's nodes, or drop its inventory file")


def _node(rf: ResolvedFleet, pv: PoolView, node: str, inv, f, path: tuple) -> Iterator[Diagnostic]:
    want_model = pv.gpu.key if pv.gpu is not None else None
    unknown = [i for i, m in sorted(f.models.items()) if m is None]
    if unknown:
        g = inv.gpu(unknown[0])
        dev = g.pci.device_id if g.pci else "unknown"
        yield rf.diag(E_UNKNOWN_HARDWARE,
                      f"node {node}: GPU {unknown[0]} ({g.name or g.product or 'no name'}, PCI device {dev}) "
                      f"is not in gpuplan's catalog",
                      path, hint="update gpuplan, or take the node out of the pool")
        return
    models = set(f.models.values())
    if want_model is not None and (models != {want_model} or f.gpu_count != (pv.gpus_per_node or 0)):
        want_name = want_model
        yield rf.diag(E_HARDWARE_MISMATCH,
                      f"node {node}: inventory has {_hardware(f)}, pool {pv.name} expects "
                      f"{pv.gpus_per_node}× {want_name}",
                      path,
                      hint="fix the pool's gpu/gpusPerNode, or move the node to a pool of its hardware")
        return
    yield from _mig(rf, pv, node, inv, f, path)


def _mig(rf: ResolvedFleet, pv: PoolView, node: str, inv, f, path: tuple) -> Iterator[Diagnostic]:
    s = pv.pool.sharing
    layouts = pv.gpu_layouts()
    if isinstance(s, Mig):
        for idx, lay in enumerate(layouts):
            if lay is None:
                continue
            cap = f.mig_capable.get(idx)
            if cap is False:
                yield rf.diag(E_MIG_UNSUPPORTED,
                              f"node {node}: GPU {idx} reports no MIG capability, pool {pv.name} sets a MIG layout",
                              path, hint="check the GPU model and driver, or use a pool without MIG for this node")
                return
            g = _gpu(inv, idx)
            offered = {p.name for p in (g.mig.profiles if g is not None and g.mig else ())}
            if offered:
                from gpuplan.catalog import parse_profile_name

                missing = sorted(p for p in lay if p not in offered
                                 and ((pn := parse_profile_name(p)) is None or pn.gi_name not in offered))
                if missing:
                    yield rf.diag(E_MIG_UNSUPPORTED,
                                  f"node {node}: GPU {idx} does not offer {', '.join(missing)} "
                                  f"(NVML lists {', '.join(sorted(offered))})",
                                  path, hint="a newer driver may add the profile; or change the layout")
                    return
    changed = []
    for idx, want in enumerate(layouts):
        enabled = f.mig_enabled.get(idx)
        current = f.mig_layouts.get(idx)
        if enabled is None and f.mig_capable.get(idx) is not True:
            continue  # not capable: nothing to reconfigure
        if want is None:
            if enabled:
                changed.append((idx, current, None))
            continue
        if not enabled:
            changed.append((idx, None, want))
        elif current is not None and dict(sorted(current.items())) != dict(sorted(want.items())):
            changed.append((idx, current, want))
    if changed:
        # GPUs of one node can differ in both directions (per-GPU layouts, a half-applied
        # change), so each distinct (now, wanted) pair is named with its GPUs.
        groups: dict[tuple[str, str], list[str]] = {}
        for idx, cur, new in changed:
            groups.setdefault((_fmt_layout(cur), _fmt_layout(new)), []).append(str(idx))
        states = "; ".join(f"GPU{'s' if len(ids) > 1 else ''} {', '.join(ids)} now {cur}, wanted {new}"
                           for (cur, new), ids in groups.items())
        yield rf.diag(I_RECONFIGURE,
                      f"node {node}: MIG state differs from pool {pv.name} ({states}): will be reconfigured "
                      f"(node drained)",
                      path, hint="expected after a layout change; schedule the drain")


def _gpu(inv, idx: int):
    try:
        return inv.gpu(idx)
    except KeyError:
        return None
