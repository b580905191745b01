"""Cluster API MachineDeployments sized by the Cluster Autoscaler: what Cluster API and the
autoscaler do to a pool's nodes, as the rest of gpuplan needs it.

The GPU Operator runs the pool's GPU software (driver, device plugin, mig-manager) exactly as
on static nodes: the pool advertises what its sharing and MIG layout say. What differs is how
the nodes get gpuplan's labels and taints, and how the autoscaler sees them:

- **Labels and taints from the bootstrap config.** Cluster API copies to a Node only the
  Machine labels under ``node-role.kubernetes.io``, ``node-restriction.kubernetes.io`` and
  ``node.cluster.x-k8s.io`` (and those its ``--additional-sync-machine-labels`` regexes match)
  (kubernetes-sigs/cluster-api@v1.14.0 util/labels/helpers.go:79-107); Machine taints reach
  the Node only behind the alpha ``MachineTaintPropagation`` gate, off by default
  (feature/feature.go:88-111); and NFD's NodeFeatureRule matches nodes by name, which a
  MachineDeployment's nodes do not have in advance. So the kubelet registers each node with
  the pool's labels (``--node-labels``) and taints (kubeadm ``nodeRegistration.taints``) from
  the pool's ``KubeadmConfigTemplate`` (``gpuplan.lower.provision_capi``).
- **The accelerator label.** The autoscaler's clusterapi provider knows GPU nodes by the label
  ``cluster-api/accelerator`` (kubernetes/autoscaler@cluster-autoscaler-1.36.1
  cluster-autoscaler/cloudprovider/clusterapi/clusterapi_provider.go:51-52); its value is the
  GPU type ``--gpu-total`` limits (README.md:496-518). A node with that label and no
  allocatable ``nvidia.com/gpu`` (nor another known vendor resource) is counted unready
  (processors/customresources/gpu_processor.go:41-70, utils/gpu/gpu.go:137-146), for good on
  a node that advertises only ``nvidia.com/mig-*`` or renamed shared resources (#8095, open;
  no release through 1.36.1 has a fix), and the autoscaler stops scaling the whole cluster
  once enough nodes are unready (clusterstate/clusterstate.go:493-505, 720-803: every node
  counts, in a node group or not). gpuplan therefore sets the label only on pools whose nodes
  advertise ``nvidia.com/gpu`` (:func:`accelerator_labelled`); GP675 refuses an autoscaled pool
  whose nodes do not.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from gpuplan.nodefacts import fact
from gpuplan.provisioning.pools import GPU, POOL_LABEL
from gpuplan.spec.models import Pool

if TYPE_CHECKING:
    from gpuplan.spec.models import Capi

TITLE = "Cluster API MachineDeployment"
# How a changed node label reaches the nodes, for the generated README: the labels are kubelet
# flags in the content-addressed KubeadmConfigTemplate, whose new name the MachineDeployment's
# ``configRef`` names, and Cluster API rolls every machine out (machine_rollout, below).
LABELS_CHANGE = ("a changed label renames the pool's KubeadmConfigTemplate, and Cluster API replaces every "
                 "machine of the MachineDeployment (a rolling update, each node drained first)")

# kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/clusterapi/
ACCELERATOR_LABEL = fact("capi", "label.accelerator")  # clusterapi_provider.go:52 (GPULabel), gpuplan/upstream/nodes/capi.json
# The Cluster Autoscaler release that stops counting nodes with only nvidia.com/mig-* or shared
# resources as unready (kubernetes/autoscaler#8095; fix PRs kubernetes/autoscaler#9673 and
# kubernetes-sigs/cluster-autoscaler#92, both open). None: no release has it yet.
READINESS_FIX_FROM: tuple[int, ...] | None = None


# kubernetes-sigs/cluster-api@v1.14.0 core/webhooks/admission/machinedeployment.go:157: a
# MachineDeployment's name must be a label value (it becomes cluster.x-k8s.io/deployment-name)
MAX_DEPLOYMENT_NAME = 63


def deployment_name(pool_name: str) -> str:
    """The pool's MachineDeployment: ``gpuplan-<pool>`` (GP694 keeps it within 63 characters)."""
    return f"gpuplan-{pool_name}"


def settings(pool: Pool) -> "Capi":
    assert pool.capi is not None
    return pool.capi


def platform_gpu_stack(pool: Pool) -> bool:
    return False  # the GPU Operator runs the pool's GPU software


def accelerator(pool: Pool) -> str:
    """The ``cluster-api/accelerator`` value: the spec's, else the GPU model in lower case
    (``A100-SXM4-80GB`` -> ``a100-sxm4-80gb``)."""
    from gpuplan.catalog.gpus import resolve_gpu

    own = settings(pool).accelerator
    if own:
        return own
    gpu = resolve_gpu(pool.gpu)
    return (gpu.key if gpu is not None else str(pool.gpu)).lower()


def max_nodes(pv: Any) -> int:
    """The pool's ceiling in whole nodes (``maxGPUs`` / GPUs per node)."""
    gpn = pv.gpus_per_node or 0
    return settings(pv.pool).max_gpus // gpn if gpn else 0


def fixed_size(pv: Any) -> bool:
    """``minNodes`` equals the ceiling: the MachineDeployment has ``replicas`` and no autoscaler
    annotations, so the autoscaler never resizes it."""
    return settings(pv.pool).min_nodes >= max_nodes(pv)


def gpu_ready_to_autoscaler(pv: Any, version: tuple[int, ...] | None = None) -> bool:
    """Whether the autoscaler counts a ready node of the pool as ready while it carries the
    accelerator label: it advertises ``nvidia.com/gpu`` (exclusive GPUs, MIG ``single``, a MIG
    layout that leaves a GPU whole, unrenamed sharing), or ``version`` has the fix."""
    if version is not None and READINESS_FIX_FROM is not None and version >= READINESS_FIX_FROM:
        return True
    return pv.node_resources().get(GPU, 0) > 0


def accelerator_labelled(pv: Any) -> bool:
    """gpuplan puts ``cluster-api/accelerator`` on the pool's nodes (and into the scale-from-zero
    labels) only where the autoscaler then still sees them ready."""
    return gpu_ready_to_autoscaler(pv)


def platform_labels(pv: Any) -> dict[str, str]:
    """Labels the pool's nodes carry beyond gpuplan's identity labels: the accelerator label
    (the kubelet sets it with the others, from the bootstrap config)."""
    return {ACCELERATOR_LABEL: accelerator(pv.pool)} if accelerator_labelled(pv) else {}


# How a MachineDeployment replaces its machines. Cluster API defaults a RollingUpdate to
# ``maxSurge: 1, maxUnavailable: 0`` (kubernetes-sigs/cluster-api@v1.14.0
# core/webhooks/admission/machinedeployment.go:111-118): the new MachineSet grows to ``replicas +
# maxSurge`` machines before any old one goes (core/reconcilers/machinedeployment/mdutil/
# util.go:665-679 ``NewMSNewReplicas``), and an old MachineSet shrinks only while ``replicas -
# maxUnavailable`` machines stay available (machinedeployment_rollout_rollingupdate.go:224-225).
# On bare metal a machine is a host: a Metal3Machine binds a free BareMetalHost, and with none free
# it waits, requeuing "no available host found" (metal3-io/cluster-api-provider-metal3@v1.13.2
# baremetal/metal3machine_manager.go:366-378, ``chooseHost`` :841-857). A pool whose every host is
# in use would then never roll: the surge machine waits for a host that only the rollout could
# free. ``maxSurge: 0, maxUnavailable: 1`` deletes one old machine first (its node drained), whose
# host the next machine takes (ResolveFenceposts keeps at least one unavailable when both are 0,
# util.go:729-747). The strategy is not part of ``MachineTemplateUpToDate`` (machine_rollout
# below), so setting it rolls no machine.
METAL3_TEMPLATE = ("infrastructure.cluster.x-k8s.io", "Metal3MachineTemplate")
METAL3_ROLLOUT = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}


def bare_metal(pool: Pool) -> bool:
    """The pool's machines are Metal3 BareMetalHosts (its ``infrastructureRef`` is a
    ``Metal3MachineTemplate``)."""
    ref = settings(pool).infrastructure_ref
    return (ref.api_group, ref.kind) == METAL3_TEMPLATE


def rollout(pool: Pool) -> dict[str, Any] | None:
    """The MachineDeployment's ``spec.rollout`` (None: Cluster API's default, a surge machine)."""
    return copy.deepcopy(METAL3_ROLLOUT) if bare_metal(pool) else None


# The placement proof reads the generated bootstrap config back (gpuplan.placement: read_template);
# `plan --base` asks what a changed MachineDeployment does (gpuplan.report.disruption: template_changes).
TEMPLATE_KINDS = ("KubeadmConfigTemplate", "MachineDeployment")
TEMPLATE_PATH = "provisioning/capi/{pool}.yaml"  # gpuplan.lower.provision_capi writes it
NODE_LABELS_ARG = "node-labels"


def parse_label_list(text: str) -> dict[str, str]:
    """``k=v,k=v`` (the kubelet's ``--node-labels``) as a map."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key:
            out[key] = value
    return out


def read_template(doc: dict[str, Any]) -> tuple[str, dict[str, str], list[dict[str, str]]] | None:
    """A generated KubeadmConfigTemplate: the labels and taints its kubelet registers the node with
    (None for the MachineDeployment, whose nodes are described by its bootstrap config)."""
    if doc.get("kind") != "KubeadmConfigTemplate":
        return None
    reg = (((((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("joinConfiguration") or {})
           .get("nodeRegistration") or {})
    args = {a.get("name"): a.get("value", "") for a in reg.get("kubeletExtraArgs") or ()}
    labels = parse_label_list(args.get(NODE_LABELS_ARG, ""))
    pool = labels.get(POOL_LABEL) or ((doc.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
    if not pool:
        return None
    taints = [{"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]} for t in reg.get("taints") or ()]
    return pool, labels, taints


def machine_rollout(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """What makes Cluster API replace every machine of a MachineDeployment going from ``old`` to
    ``new`` (both as generated), or None when its machines stay.

    The MachineDeployment controller keeps a MachineSet whose template is up to date and rolls
    out a new one otherwise; "up to date" compares exactly ``version``, ``bootstrap``,
    ``infrastructureRef`` and ``failureDomain`` (kubernetes-sigs/cluster-api@v1.14.0
    core/reconcilers/machinedeployment/mdutil/util.go:359-411, ``MachineTemplateUpToDate``), while
    the template's labels and annotations propagate to existing Machines in place
    (docs/book/src/reference/api/metadata-propagation.md). gpuplan's content-addressed
    KubeadmConfigTemplate is renamed whenever the node labels, taints or kubelet settings change."""
    o = ((old.get("spec") or {}).get("template") or {}).get("spec") or {}
    n = ((new.get("spec") or {}).get("template") or {}).get("spec") or {}
    what = []
    if (o.get("bootstrap") or {}).get("configRef") != (n.get("bootstrap") or {}).get("configRef"):
        what.append("bootstrap config (node labels, taints, kubelet settings)")
    if o.get("infrastructureRef") != n.get("infrastructureRef"):
        what.append("infrastructure template")
    for field in ("version", "failureDomain"):
        if o.get(field) != n.get(field):
            what.append(f"{field} {o.get(field)} -> {n.get(field)}")
    if not what:
        return None
    return (", ".join(what) + " changed: Cluster API replaces every machine of the pool (a rolling update, "
            "each node drained before its machine is deleted)")


def template_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """(severity, message) for a MachineDeployment that changes between two trees (``gpuplan plan
    --base``): a rollout replaces every machine of the pool. A KubeadmConfigTemplate never changes
    under its name (it is content-addressed): a change is a new one, which the MachineDeployment's
    ``configRef`` names."""
    if new.get("kind") != "MachineDeployment":
        return []
    why = machine_rollout(old, new)
    if why is None:
        return []
    pool = ((new.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL, (new.get("metadata") or {}).get("name"))
    return [("replace", f"pool {pool}: {why}; merge when the pool's running jobs may be evicted")]
