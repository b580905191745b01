"""``README.md`` of the generated tree: what is here, how it was made, how it is delivered.

Rendered from ``gpuplan/render/templates/readme.md.j2`` (sandboxed Jinja2,
StrictUndefined). Every value from the spec is escaped for a Markdown table
cell here, before it reaches the template; nothing from the spec is ever
evaluated as template text. The file list is built from the artifacts the
other targets produced, with their descriptions, so new targets (kubelet
drop-ins, Karpenter objects) appear without changes here.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import os
from typing import Any, Sequence

import gpuplan
from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import (
    app_name, operator_app_name, plugin_config_key, pool_mig_config, pool_node_taints, priority_class_name,
    project_name,
)
from gpuplan.lower.common import cell, engine
from gpuplan.provisioning.pools import karpenter_cloud, node_group_pool, operator_runs_driver, platform_gpu_stack, title
from gpuplan.lower.kubelet import EKS_AL2023
from gpuplan.lower.gitops import admin_project_name, gitops_namespace, project_app_name
from gpuplan.lower.kueue import BY_HAND_PATH as KUEUE_BY_HAND
from gpuplan.resolve import ResolvedFleet
from gpuplan.units import class_scoped

README = "README.md"


def _sharing(pv: Any) -> str:
    s = pv.pool.sharing
    if s.mode == "exclusive":
        return "exclusive"
    if s.mode == "mig":
        if s.layout is not None:
            layout = ", ".join(f"{k}×{v}" for k, v in s.layout.items())
        else:
            layout = "per GPU"
        if platform_gpu_stack(pv.pool):  # partitioned by the platform (GKE gpuPartitionSize)
            return f"MIG by the {title(pv.pool)} ({layout})"
        return f"MIG {s.strategy} ({layout})"
    return f"{s.mode} ×{s.replicas}"


def pool_taints(pv: Any) -> list[dict[str, str]]:
    """The taints on a pool's nodes, which its tiers' pods must tolerate."""
    return pool_node_taints(pv)


def _taint_text(t: dict[str, str]) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if "value" in t else f"{t['key']}:{t['effect']}"


def _pool_rows(rf: ResolvedFleet) -> list[dict[str, str]]:
    rows = []
    for pv in rf.pools:
        p = pv.pool
        if p.nodes is not None:
            nodes = f"{len(p.nodes)} static"
        elif p.karpenter is not None:
            nodes = f"Karpenter, ≤ {pv.node_count if pv.node_count is not None else '?'} (limits.nodes)"
        elif node_group_pool(p):
            nodes = f"{title(p)}, ≤ {pv.node_count if pv.node_count is not None else '?'}"
        else:
            nodes = "?"
        bottlerocket = p.karpenter is not None and p.karpenter.ami_family == "Bottlerocket"
        res = ", ".join(f"{k}: {v}" for k, v in pv.node_resources().items()) or "-"
        mig = pool_mig_config(pv)
        rows.append({
            "name": cell(pv.name),
            "gpu": cell(pv.gpu.key if pv.gpu is not None else p.gpu),
            "gpus_per_node": cell(pv.gpus_per_node if pv.gpus_per_node is not None else "?"),
            "nodes": cell(nodes),
            "sharing": cell(_sharing(pv)),
            "resources": cell(res),
            "plugin_config": ("Bottlerocket's own" if bottlerocket else f"{cell(title(p))}'s own" if platform_gpu_stack(p)
                              else f"`{cell(plugin_config_key(rf, pv))}`"),
            "mig_config": f"`{cell(mig)}`" if mig and not bottlerocket else "-",
            "taints": cell(", ".join(_taint_text(t) for t in pool_taints(pv)) or "-"),
        })
    return rows


def _tier_rows(rf: ResolvedFleet) -> list[dict[str, str]]:
    return [
        {
            "name": cell(t.name),
            "pool": cell(t.pool),
            "resource": cell(rf.tier_resource(t) or "?"),
            "priority": cell(t.priority),
            "preemption": cell(t.preemption),
            "pc": cell(priority_class_name(t)),
            "enforce": "yes" if t.enforce_priority else ("yes (its resource is on other pools too)"
                                                          if class_scoped(rf, t) else "no"),
        }
        for t in rf.fleet.spec.tiers
    ]


# Above this many rows the README's Tenants and Files tables become counts.
LARGE_TABLE_ROWS = 500


def _tenant_rows(rf: ResolvedFleet) -> list[dict[str, str]]:
    rows = []
    for tenant in rf.fleet.spec.tenants:
        for ns in tenant.namespaces:
            grants = []
            for tier_name, units in tenant.quotas.get(ns, {}).items():
                tier = rf.tier_by_name.get(tier_name)
                res = rf.tier_resource(tier) if tier is not None else None
                grants.append(f"{tier_name}: {units} of {res or '?'}")
            rows.append({"tenant": cell(tenant.name), "namespace": cell(ns),
                         "grants": cell("; ".join(grants) or "none")})
    return rows



# The Argo CD release each feature of a tree first needs (argoproj/argo-cd), highest wins:
# (version, why, applies to the tree?). v3.0: the `argocd.argoproj.io/tracking-id` annotation
# instead of a 63-character label (v3.0.0 docs/operator-manual/upgrading/2.14-3.0.md:234-238);
# v3.1: an Application source from an OCI registry (`path: .`, docs/user-guide/oci.md, first in
# v3.1.0), which the Kueue chart's Application uses (gpuplan.lower.kueue.CHART_REPO).
ARGOCD_FEATURES = (
    ("v3.0", "the tracking-id annotation", lambda rf: True),
    ("v3.1", "the Kueue chart's OCI Helm source (`oci://registry.k8s.io/kueue/charts`)",
     lambda rf: rf.fleet.spec.queueing is not None and rf.fleet.spec.queueing.engine == "kueue"),
)


def argocd_floor(rf: ResolvedFleet) -> tuple[str, str]:
    """(the oldest Argo CD release that runs this tree, what needs it), from :data:`ARGOCD_FEATURES`."""
    used = [(v, why) for v, why, applies in ARGOCD_FEATURES if applies(rf)]
    return max(used, key=lambda vw: tuple(int(x) for x in vw[0][1:].split(".")))

def _preinstalled_toolkit_note(rf: ResolvedFleet, managed_driver: bool) -> str:
    """What a node's own toolkit must say (CDI off): ``nvidia`` as containerd's default
    runtime (the operator gives only its operands ``runtimeClassName: nvidia``,
    NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:2747-2753), the settings
    that keep ``NVIDIA_VISIBLE_DEVICES`` inert under the plugin's ``volume-mounts``
    strategy (:data:`gpuplan.lower.operator.NODE_TOOLKIT_SETTINGS`), and the driver root
    of the operator's driver container."""
    from gpuplan.lower.operator import NODE_TOOLKIT_SETTINGS
    from gpuplan.provisioning.runtime import runtime_class, unconfigurable_toolkit_pools

    platform_owned = unconfigurable_toolkit_pools(rf)
    if platform_owned:
        names = ", ".join(pv.name for pv in platform_owned)
        return (f"the platform's on {names} (CDI off for the operator): containerd runs GPU containers with "
                f"`{runtime_class(rf)}`, the RuntimeClass the operator gives its pods (`operator.runtimeClass`). "
                "No object gpuplan writes can configure that toolkit, so the device plugin keeps its `envvar` "
                "strategy, the one it serves: a container that requests no GPU and whose image sets "
                "`NVIDIA_VISIBLE_DEVICES=all` sees every GPU of its node (GP991)")
    settings = ", ".join(f"`{k} = {v}`" for k, v in NODE_TOOLKIT_SETTINGS)
    al2023 = karpenter_cloud(rf.fleet.spec.cluster) == "aws" and any(
        pv.pool.karpenter is not None and pv.pool.karpenter.ami_family == "AL2023" for pv in rf.pools)
    static = any(pv.pool.is_static for pv in rf.pools)
    note = ("preinstalled on every GPU node (CDI off). "
            + ("On static nodes: " if al2023 and static else "")
            + "`nvidia` must be containerd's default runtime (the operator gives only its own pods "
            "`runtimeClassName: nvidia`); `/etc/nvidia-container-runtime/config.toml` must set "
            f"{settings}: the device plugin passes GPUs as volume mounts (`DEVICE_LIST_STRATEGY=volume-mounts`), "
            "so without the second GPU pods get no GPU, and without the first any pod whose image sets "
            "`NVIDIA_VISIBLE_DEVICES=all` sees every GPU of its node")
    if managed_driver and static:
        note += "; with the operator's driver container also `root = \"/run/nvidia/driver\"`"
    if al2023:
        note += (". The userData of the Karpenter AL2023 pools sets the two "
                 "settings with `nvidia-ctk config` before kubelet starts")
    return note


def _driver_upgrades(rf: ResolvedFleet) -> dict[str, Any]:
    """Which static pools an automatic driver upgrade rolls (and whose GPU pods it deletes),
    and which it is kept off (:func:`gpuplan.identity.driver_upgrade_held`)."""
    from gpuplan.identity import driver_upgrade_held

    op = rf.fleet.spec.cluster.gpu_operator
    rolled: list[str] = []
    held: list[str] = []
    if op.driver == "managed" and op.driver_upgrade.auto_upgrade:
        for pv in rf.pools:
            if operator_runs_driver(pv.pool):
                (held if driver_upgrade_held(rf, pv) else rolled).append(f"`{cell(pv.name)}`")
    from gpuplan.lower.operator import per_pool_drivers

    return {"driver_rolled": ", ".join(rolled), "driver_held": ", ".join(held),
            "operator_ns": cell(op.namespace), "per_pool_drivers": per_pool_drivers(rf)}


def _efa_pools(rf: ResolvedFleet) -> list[dict[str, str]]:
    """Karpenter pools whose multi-node jobs use EFA (:func:`gpuplan.lower.karpenter_aws.pool_efa`):
    EFA interfaces per node and the taints the EFA device plugin must tolerate (the eks-charts
    ``aws-efa-k8s-device-plugin`` chart tolerates none by default, ``tolerations: []``)."""
    from gpuplan.lower.karpenter_aws import pool_efa

    out = []
    for pv in rf.pools:
        if pv.pool.karpenter is None or not (n := pool_efa(rf, pv)):
            continue
        out.append({"name": cell(pv.name), "count": str(n),
                    "taints": ", ".join(f"`{cell(_taint_text(t))}`" for t in pool_taints(pv))})
    return out


def _job_grace(rf: ResolvedFleet) -> list[dict[str, str]]:
    """Karpenter pools with a NodePool ``terminationGracePeriod`` and its value."""
    from gpuplan.lower.karpenter import termination_grace_period

    return [{"name": cell(pv.name), "grace": cell(g)} for pv in rf.pools
            if pv.pool.karpenter is not None and (g := termination_grace_period(rf, pv)) is not None]


# The GPU Operator's OS tag of the EKS AL2023 AMI (NFD os-release ID + VERSION_ID).


def _nodeadm_pools(rf: ResolvedFleet) -> list[dict[str, str]]:
    """Static pools on the EKS AL2023 AMI (``os: amzn2023``) with a kubelet drop-in: nodeadm
    starts the kubelet with ``--config-dir=/etc/kubernetes/kubelet/config.json.d`` only when its
    NodeConfig has ``spec.kubelet.config``, and writes that config there itself
    (awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/kubelet/config.go:31-35,351-359): a file
    copied to kubeadm's ``/etc/kubernetes/kubelet.conf.d`` is never read. The settings go into
    the node's NodeConfig instead, the same document the Karpenter AL2023 pools' userData has."""
    from gpuplan.lower.karpenter_aws import al2023_nodeconfig
    from gpuplan.render.yamlwriter import dump

    out = []
    for pv in rf.pools:
        if not pv.pool.is_static or pv.pool.os != EKS_AL2023:
            continue
        nc = al2023_nodeconfig(pv)
        if nc is not None:
            out.append({"name": cell(pv.name), "nodeconfig": dump(nc).rstrip("\n")})
    return out


def _karpenter_floor(rf: ResolvedFleet) -> str:
    """What a Karpenter release older than the pinned v1.14.1 lacks of what this tree uses."""
    kp = [pv.pool.karpenter for pv in rf.pools if pv.pool.karpenter is not None]
    lacks = []
    if any(k.node_overlay for k in kp):
        # kubernetes-sigs/karpenter: pkg/apis/v1alpha1/nodeoverlay.go first in v1.7.0
        lacks.append("releases before v1.7 have no NodeOverlay")
    if any(k.capacity_reservations for k in kp):
        # aws/karpenter-provider-aws: capacityReservationSelectorTerms first in v1.3.0;
        # kubernetes-sigs/karpenter pkg/operator/options/options.go: ReservedCapacity=true from v1.6.0
        lacks.append("before v1.3 the EC2NodeClass has no `capacityReservationSelectorTerms`, and before "
                     "v1.6 the `ReservedCapacity` feature gate is off by default")
    return "; ".join(lacks)


def _dra_caveats(rf: ResolvedFleet) -> dict[str, Any]:
    """docs/dra.md "Not covered", for the DRA pools of this fleet."""
    from gpuplan.dra.claims import dra_pools, pool_extended_resources

    pools = dra_pools(rf)
    if not pools:
        return {"dra_pools": "", "dra_mixed": False, "dra_mig": "", "dra_karpenter": "", "dra_extended": False}
    def names(pvs: list) -> str:
        return ", ".join(f"`{cell(pv.name)}`" for pv in pvs)

    return {
        "dra_pools": names(pools),
        "dra_mixed": len(pools) < len(rf.pools),
        "dra_mig": names([pv for pv in pools if pv.pool.sharing.mode == "mig"]),
        "dra_karpenter": names([pv for pv in pools if pv.pool.karpenter is not None]),
        "dra_extended": any(pool_extended_resources(rf, pv) for pv in pools),
    }


def _admission(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.lower import admission

    if not admission.enabled(rf):
        return {"exempt_namespaces": []}
    return {"exempt_namespaces": [cell(n) for n in admission.exempt_namespaces(rf)]}


def _mig_at_boot(rf: ResolvedFleet) -> dict[str, Any]:
    """Karpenter AL2023 MIG pools, whose userData applies the layout (docs/karpenter.md
    "MIG at boot"), and the MIG pools mig-manager serves."""
    from gpuplan.identity import boot_mig
    from gpuplan.spec.models import Mig

    mig = [pv for pv in rf.pools if isinstance(pv.pool.sharing, Mig)]
    return {"boot_mig_pools": ", ".join(f"`{cell(pv.name)}`" for pv in mig if boot_mig(pv)),
            "operator_mig_pools": ", ".join(f"`{cell(pv.name)}`" for pv in mig if not boot_mig(pv))}


def _gke(rf: ResolvedFleet) -> dict[str, Any]:
    """GKE node pools: where their ContainerNodePools go and which run GKE's own GPU stack."""
    gcp = rf.fleet.spec.cluster.gcp
    pools = [pv for pv in rf.pools if pv.pool.gke is not None]
    if not pools or gcp is None:
        return {"gke_pools": ""}
    return {"gke_pools": ", ".join(f"`{cell(pv.name)}`" for pv in pools),
            "gke_stack": ", ".join(f"`{cell(pv.name)}`" for pv in pools if platform_gpu_stack(pv.pool)),
            "gke_ns": cell(gcp.namespace), "gke_project": cell(gcp.project)}


def _prerequisites(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.units import preemptible_pool
    from gpuplan.lower.operator import nfd_taints_needed, per_pool_drivers

    op = rf.fleet.spec.cluster.gpu_operator
    kp = [pv for pv in rf.pools if pv.pool.karpenter is not None]
    aws = rf.fleet.spec.cluster.aws
    on_nodes = ", ".join(pv.name for pv in rf.pools if operator_runs_driver(pv.pool))
    if op.driver == "managed" and not on_nodes:
        driver = "the driver each pool's node image or platform installs (the operator's driver runs on no pool)"
    elif op.driver == "managed" and per_pool_drivers(rf):
        from gpuplan.identity import pool_driver_version

        each = ", ".join(f"{pv.name} {pool_driver_version(rf, pv)}" for pv in rf.pools if operator_runs_driver(pv.pool))
        driver = (f"driver installed by the operator on the nodes of {on_nodes}, one NVIDIADriver per pool "
                  f"(`gpu-operator/nvidiadrivers.yaml`: {each}), each built for its nodes' own OS"
                  + (" (the EKS AMIs of Karpenter pools ship their own)" if kp else ""))
    elif op.driver == "managed":
        driver = (f"driver {op.driver_version or 'of the chart'} installed by the operator on the nodes of {on_nodes}"
                  + (" (the EKS AMIs of Karpenter pools ship their own)" if kp else ""))
    else:
        driver = "the NVIDIA driver preinstalled on every GPU node"
    toolkit = ("installed by the operator on every GPU node (CDI on)" if rf.toolkit != "preinstalled" else
               _preinstalled_toolkit_note(rf, op.driver == "managed"))
    return {
        "karpenter": bool(kp),
        "nap": bool(kp) and karpenter_cloud(rf.fleet.spec.cluster) == "azure",
        "efa_pools": _efa_pools(rf),
        "karpenter_floor": _karpenter_floor(rf),
        "nodeadm_pools": _nodeadm_pools(rf),
        **_dra_caveats(rf),
        "job_grace": _job_grace(rf),
        **_mig_at_boot(rf),
        **_gke(rf),
        "spot_pools": [pv.name for pv in kp if preemptible_pool(pv)],
        "overlay": any(pv.pool.karpenter.node_overlay for pv in kp if pv.pool.karpenter is not None),
        "node_role": cell(aws.node_role) if aws is not None else "",
        "nfd_taints": nfd_taints_needed(rf),
        "service_monitor": op.dcgm_exporter.enabled and op.dcgm_exporter.service_monitor,
        "driver_note": cell(driver),
        "toolkit_note": toolkit,
    }


# The oldest Karpenter (AWS provider) whose NodePools honour `limits.nodes`
# (kubernetes-sigs/karpenter #2526, commit 9f749d9, first in v1.11.0; GP633)
KARPENTER_FLOOR = "v1.11"
# The oldest Flux controllers that serve the API versions of this tree: kustomize.toolkit.fluxcd.io/v1
# (fluxcd/kustomize-controller v1.0.0 api/v1/kustomization_types.go), helm.toolkit.fluxcd.io/v2
# (fluxcd/helm-controller v1.0.0 api/v2/helmrelease_types.go), source.toolkit.fluxcd.io/v1 HelmRepository
# (fluxcd/source-controller v1.3.0 api/v1/helmrepository_types.go)
FLUX_FLOORS = {"kustomize-controller": "v1.0", "helm-controller": "v1.0", "source-controller": "v1.3"}


def installed_first(prerequisites: dict[str, Any]) -> list[str]:
    """What must run in the cluster before the first sync, one short item each, from the
    values of :func:`_prerequisites` (the "Prerequisites" section says why and since which release)."""
    p = prerequisites
    out = []
    if p["nap"]:
        out.append("AKS Node Auto Provisioning")
    elif p["karpenter"]:
        out.append(f"Karpenter {KARPENTER_FLOOR} or later (AWS provider)"
                   + (" with `nodeOverlay=true`" if p["overlay"] else "")
                   + (f", node role `{p['node_role']}`" if p["node_role"] else ""))
        if p["spot_pools"]:
            out.append("Karpenter's interruption queue (spot pools)")
    if p["gke_pools"]:
        out.append("Config Connector (the GKE node pools)")
    if p["efa_pools"]:
        out.append("the EFA device plugin")
    if p["service_monitor"]:
        out.append("the Prometheus Operator's ServiceMonitor CRD")
    return out


# Where the CRD of a kind that may be missing at sync time comes from (gpuplan.lower.common
# CRD_MAY_BE_MISSING): the README names only those of the kinds this tree holds.
CRD_SOURCES = {"NodeFeatureRule": "the operator chart's NFD", "NVIDIADriver": "the operator chart",
               "NodePool": "Karpenter", "EC2NodeClass": "Karpenter", "NodeOverlay": "Karpenter",
               "AKSNodeClass": "AKS Node Auto Provisioning"}


def tree_kinds(produced: Sequence[Produced]) -> frozenset[str]:
    """The kinds of the objects the root sync applies (the artifacts it lists)."""
    return frozenset(k for a in produced if a.applied for k in a.kinds)


def _delivery(rf: ResolvedFleet, produced: Sequence[Produced]) -> dict[str, Any]:
    """The sync waves and the may-be-missing CRDs of the kinds this tree holds, from the same
    tables that annotate its objects (``gpuplan.lower.common.WAVES``, ``CRD_MAY_BE_MISSING``)."""
    from gpuplan.lower.common import CRD_MAY_BE_MISSING, sync_wave

    kinds = tree_kinds(produced)
    waves: dict[int, list[str]] = {}
    for k in sorted(kinds):
        waves.setdefault(sync_wave(k), []).append(k)
    missing: dict[str, list[str]] = {}
    for k in sorted(kinds & CRD_MAY_BE_MISSING):
        missing.setdefault(CRD_SOURCES.get(k, "its own chart"), []).append(k)
    return {
        "waves": "; ".join(f"`{w}` " + ", ".join(names) for w, names in sorted(waves.items())),
        "missing_crds": "; ".join(f"{', '.join(names)}, from {src}" for src, names in missing.items()),
        "nfd_rules": "NodeFeatureRule" in kinds,
    }


def _label_paths(rf: ResolvedFleet) -> dict[str, Any]:
    """How each kind of pool in this tree gets its labels and taints, and how a changed label
    reaches its nodes: static pools through NFD NodeFeatureRules, Karpenter pools through their
    NodePool template, node groups through their template (``gpuplan.provisioning``'s facts)."""
    from gpuplan.provisioning.pools import karpenter_pool, labels_change, static_nodes

    def names(pvs: list) -> str:
        return ", ".join(f"`{cell(pv.name)}`" for pv in pvs)

    static = [pv for pv in rf.pools if static_nodes(pv.pool)]
    karp = [pv for pv in rf.pools if karpenter_pool(pv.pool)]
    groups: dict[str, list] = {}
    for pv in rf.pools:
        if node_group_pool(pv.pool):
            groups.setdefault(title(pv.pool), []).append(pv)
    # title and change are gpuplan's own text (Markdown included), not the spec's
    group_rows = [{"title": t, "pools": names(pvs), "change": labels_change(pvs[0].pool) or ""}
                  for t, pvs in groups.items()]
    return {"static_pools": names(static), "karpenter_pools": names(karp), "group_rows": group_rows}


def readme(rf: ResolvedFleet, produced: Sequence[Produced]) -> str:
    from gpuplan.render.text import render

    g = rf.fleet.spec.cluster.gitops
    # under Flux the tenancy files are listed by delivery/tenancy/kustomization.yaml, not the root's
    from gpuplan.lower.gitops import flux_tenancy_files

    tenancy = set(flux_tenancy_files(produced)) if g.engine == "flux" else set()
    listed = sorted((*produced, Produced(README, kustomize=False, description="this file", yaml=False)),
                    key=lambda a: a.path)

    def kustomize(a: Produced) -> str:
        return "no" if not a.applied else ("delivery/tenancy" if a.path in tenancy else "yes")

    static_files = [
        {"path": cell(a.path), "description": cell(a.description or "-")}
        for a in sorted(produced, key=lambda a: a.path)
        if a.path.startswith("pools/") and not a.applied
    ]
    # A large fleet's per-namespace and per-file tables would be megabytes: the
    # README keeps counts (CAPACITY.md and tenants/<tenant>/ hold the details), and
    # their rows are not made at all (tens of thousands of them at 20,000 nodes).
    namespaces = sum(len(t.namespaces) for t in rf.fleet.spec.tenants)
    tenants: list[dict[str, str]] = []
    tenants_summary = ""
    if namespaces > LARGE_TABLE_ROWS:
        tenants_summary = (f"{len(rf.fleet.spec.tenants)} tenants, {namespaces} namespaces: each namespace's "
                           "grants are in `tenants/<tenant>/resourcequotas.yaml`, with GPU-equivalents and cost in "
                           "CAPACITY.md (for a large fleet, `tenants/<tenant>/CAPACITY.md`).")
    else:
        tenants = _tenant_rows(rf)
    files: list[dict[str, str]] = []
    file_dirs: list[dict[str, Any]] = []
    if len(listed) > LARGE_TABLE_ROWS:
        per: dict[str, list[int]] = {}
        for a in listed:
            path = cell(a.path)
            d = path.split("/", 1)[0] if "/" in path else "."
            n = per.setdefault(d, [0, 0])
            n[0] += 1
            n[1] += kustomize(a) != "no"
        file_dirs = [{"path": d + ("/" if d != "." else ""), "files": n, "kustomize": k}
                     for d, (n, k) in sorted(per.items())]
    else:
        files = [{"path": cell(a.path), "kustomize": kustomize(a), "description": cell(a.description or "-")}
                 for a in listed]
    floor, floor_why = argocd_floor(rf)
    prerequisites = _prerequisites(rf)
    return render(
        "readme.md.j2",
        kubernetes_version=cell(rf.fleet.spec.cluster.kubernetes_version),
        installed_first=installed_first(prerequisites),
        karpenter_min=KARPENTER_FLOOR,
        flux_floors=FLUX_FLOORS,
        argocd_floor=floor,
        argocd_floor_why=floor_why,
        fleet=cell(rf.fleet.metadata.name),
        version=cell(gpuplan.__version__),
        spec=cell(os.path.basename(rf.file)),
        engine=engine(rf),
        engine_title="Argo CD" if engine(rf) == "argocd" else "Flux",
        out=cell(g.path.strip("/") or "."),
        app=cell(app_name(rf)),
        operator_app=cell(operator_app_name(rf)),
        gitops_ns=cell(gitops_namespace(rf)),
        project=cell(project_name(rf)),
        own_project=g.project is None,
        admin_project=cell(admin_project_name(rf)),
        project_app=cell(project_app_name(rf)),
        kueue_by_hand=any(a.path == KUEUE_BY_HAND for a in produced),
        repo_url=cell(g.repo_url),
        revision=cell(g.revision),
        repo_path=cell(g.path),
        chart_version=cell(rf.fleet.spec.cluster.gpu_operator.chart_version),
        pools=_pool_rows(rf),
        tiers=_tier_rows(rf),
        tenants=tenants,
        tenants_summary=tenants_summary,
        files=files,
        file_count=len(listed),
        file_dirs=file_dirs,
        static_files=static_files,
        **prerequisites,
        **_delivery(rf, produced),
        **_label_paths(rf),
        **_admission(rf),
        **_driver_upgrades(rf),
    )


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    return [Artifact(path=README, text=readme(rf, produced), kustomize=False,
                     description="what is in this tree and how it was made")]
