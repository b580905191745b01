"""kubelet Topology Manager / CPU Manager settings of static pools.

Karpenter pools carry the same settings in their EC2NodeClass userData
(``gpuplan.lower.karpenter``); this target writes, for each static pool with
non-default ``topology``, a KubeletConfiguration *drop-in*
(``pools/<pool>/kubelet/50-gpuplan-topology.conf``) and a README that says how
to install it. The drop-ins are node files, not Kubernetes objects: they are
not listed in the kustomization.

Facts (reference/k8s/facts.md §f): the drop-in directory (``--config-dir``,
KEP-3983: alpha 1.28, beta 1.31, GA 1.35) reads only ``*.conf`` files, in
alphanumeric order, later files overriding earlier ones, each a complete
``KubeletConfiguration`` document (apiVersion/kind + the fields it sets);
YAML and JSON both decode. ``cpuManagerPolicy: static`` needs a non-zero CPU
reservation (``reservedSystemCPUs`` or ``kubeReserved.cpu + systemReserved.cpu``),
and changing the CPU manager policy on an existing node needs
``/var/lib/kubelet/cpu_manager_state`` removed before the kubelet restarts.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.identity import kubelet_topology_fields, topology_is_default

KUBELET_API = "kubelet.config.k8s.io/v1beta1"
DROPIN_NAME = "50-gpuplan-topology.conf"
CPU_MANAGER_STATE = "/var/lib/kubelet/cpu_manager_state"
MEMORY_MANAGER_STATE = "/var/lib/kubelet/memory_manager_state"


def kubelet_dropin(pv: PoolView) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": KUBELET_API, "kind": "KubeletConfiguration"}
    doc.update(kubelet_topology_fields(pv.pool.topology))
    return doc


def _readme(rf: ResolvedFleet, pv: PoolView) -> str:
    t = pv.pool.topology
    fields = kubelet_topology_fields(t)
    nodes = ", ".join(f"`{n}`" for n in pv.pool.nodes or ())
    lines = [
        f"# kubelet settings of pool `{pv.name}`",
        "",
        f"`{DROPIN_NAME}` is a KubeletConfiguration drop-in for the static nodes of this pool "
        f"({nodes}). It is a node file, not a Kubernetes object: it is not in the kustomization "
        "and GitOps does not apply it. Install it with your node configuration tooling.",
        "",
        "Settings: " + ", ".join(f"`{k}`" for k in fields) + ".",
        "",
        "## Install",
        "",
    ]
    if pv.pool.os == EKS_AL2023:
        return "\n".join(lines + _nodeadm_steps(pv) + _why(pv)) + "\n"
    lines += [
        "1. The kubelet must run with a drop-in directory: `--config-dir=/etc/kubernetes/kubelet.conf.d` "
        "(KEP-3983: beta and on by default since Kubernetes 1.31, GA in 1.35; on 1.28-1.30 it is alpha "
        "and also needs `KUBELET_CONFIG_DROPIN_DIR_ALPHA=on` in the kubelet's environment).",
        f"2. Copy `{DROPIN_NAME}` to `/etc/kubernetes/kubelet.conf.d/`. Only `*.conf` files are read, "
        "in alphanumeric order; a later file overrides an earlier one, lists are replaced, not merged.",
        "3. Drain the node (`kubectl drain <node> --ignore-daemonsets`).",
    ]
    step = 4
    if "cpuManagerPolicy" in fields:
        lines.append(
            f"{step}. If the CPU manager policy changes, stop the kubelet and remove "
            f"`{CPU_MANAGER_STATE}` — the kubelet refuses to start when the policy in that file "
            "differs from its configuration."
        )
        step += 1
    if "memoryManagerPolicy" in fields:
        lines.append(
            f"{step}. If the memory manager policy changes, remove `{MEMORY_MANAGER_STATE}` as well. "
            "`Static` also needs `reservedMemory` in the node's base configuration, equal per NUMA "
            "node to kubeReserved + systemReserved + the hard eviction threshold for memory."
        )
        step += 1
    lines.append(f"{step}. Restart the kubelet and uncordon the node.")
    return "\n".join(lines + _why(pv)) + "\n"


def _why(pv: PoolView) -> list[str]:
    t = pv.pool.topology
    fields = kubelet_topology_fields(t)
    lines = ["", "## Why"]
    if fields.get("cpuManagerPolicy") == "static":
        reserve = (
            f"`reservedSystemCPUs: {t.reserved_system_cpus}` gives it one."
            if t.reserved_system_cpus
            else "This drop-in does not set one (topology.reservedSystemCPUs is not set): the node's base "
            "configuration must reserve CPU (`kubeReserved.cpu` or `systemReserved.cpu`), or the kubelet "
            "fails with \"the static policy requires systemreserved.cpu + kubereserved.cpu to be greater "
            "than zero\"."
        )
        lines += [
            "",
            "`cpuManagerPolicy: static` gives Guaranteed pods with integer CPU requests exclusive CPUs, "
            "and lets the Topology Manager align those CPUs with the pod's GPUs. It needs a non-zero CPU "
            f"reservation. {reserve}",
        ]
    if t.policy != "none":
        lines += [
            "",
            f"`topologyManagerPolicy: {t.policy}` with scope `{t.scope}`: see docs/karpenter.md "
            "(\"Topology Manager\") for what each policy admits and rejects.",
        ]
    return lines


EKS_AL2023 = "amzn2023"  # pools[].os of nodes on the EKS AL2023 AMI


def _nodeadm_steps(pv: PoolView) -> list[str]:
    """Install steps for static nodes on the EKS AL2023 AMI: nodeadm, not kubeadm, starts their
    kubelet; it passes ``--config-dir=/etc/kubernetes/kubelet/config.json.d`` only when the node's
    NodeConfig has ``spec.kubelet.config`` and writes that directory itself
    (awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/kubelet/config.go:31-35,351-359), so a file
    copied to kubeadm's drop-in directory is never read. The same NodeConfig as the Karpenter
    AL2023 pools' userData."""
    from gpuplan.lower.karpenter_aws import al2023_nodeconfig
    from gpuplan.render.yamlwriter import dump

    nc = al2023_nodeconfig(pv)
    return [
        "These nodes run the EKS AL2023 AMI (`os: amzn2023`): nodeadm, not kubeadm, configures their "
        "kubelet, and reads no file from `/etc/kubernetes/kubelet.conf.d/`. Use the NodeConfig below "
        f"instead of `{DROPIN_NAME}`:",
        "",
        "1. Add this NodeConfig to the node's userData (a `application/node.eks.aws` MIME part; nodeadm "
        "merges it with the others):",
        "",
        "```yaml",
        dump(nc).rstrip("\n") if nc is not None else "# no kubelet settings",
        "```",
        "",
        "2. Drain the node (`kubectl drain <node> --ignore-daemonsets`), then reboot it (nodeadm runs at "
        "boot) or replace it from the updated userData, and uncordon it.",
    ]


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    out: list[Artifact] = []
    for pv in rf.pools:
        if not pv.pool.is_static or topology_is_default(pv.pool.topology):
            continue
        base = f"pools/{pv.name}/kubelet"
        out.append(Artifact(
            path=f"{base}/{DROPIN_NAME}",
            documents=(kubelet_dropin(pv),),
            kustomize=False,
            description=f"kubelet drop-in (Topology/CPU Manager) for the static nodes of pool {pv.name}; "
                        "copy to /etc/kubernetes/kubelet.conf.d/",
        ))
        out.append(Artifact(
            path=f"{base}/README.md",
            text=_readme(rf, pv),
            kustomize=False,
            description=f"how to install the kubelet drop-in of pool {pv.name}",
        ))
    return out
