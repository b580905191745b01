"""The AWS provider's half of a Karpenter pool: ``pools/<pool>/ec2nodeclass.yaml``.

``karpenter.k8s.aws/v1`` EC2NodeClass — pinned AMI alias, node role, subnet /
security-group discovery, a root volume large enough for GPU images, IMDSv2, and
the kubelet Topology / CPU Manager settings in ``userData`` (never in
``spec.kubelet``: those fields do not exist there, reference/k8s/facts.md §a,
Surprise 1); on AL2023 also a script part that makes ``NVIDIA_VISIBLE_DEVICES``
inert in the AMI's container toolkit (:func:`al2023_toolkit_script`) and, on MIG
pools, one that applies the MIG layout before kubelet starts (:func:`al2023_mig_script`,
docs/karpenter.md "MIG at boot"). A target
of its own, beside the NodePool's: the object checks read
NodePools and need not render userData (Jinja2 and the YAML emitter stay off the
`validate` path).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import (
    POOL_LABEL, ami_alias, bottlerocket_device_plugin, bottlerocket_settings, kubelet_topology_fields,
)
from gpuplan.lower.common import metadata, obj, object_annotations
from gpuplan.lower.karpenter import karpenter_pools
from gpuplan.resolve import PoolView, ResolvedFleet

NODECLASS_API = "karpenter.k8s.aws/v1"


NODEADM_API = "node.eks.aws/v1alpha1"


DISCOVERY_TAG = "karpenter.sh/discovery"


AL2023_BOUNDARY = "//gpuplan-nodeconfig//"


# Root / data volume for GPU images (CUDA base images alone are several GB;
# training images with frameworks 15-30 GB, pulled and unpacked side by side).
GPU_VOLUME_SIZE = "200Gi"


METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


def al2023_nodeconfig(pv: PoolView) -> dict[str, Any] | None:
    fields = kubelet_topology_fields(pv.pool.topology)
    if not fields:
        return None
    return {
        "apiVersion": NODEADM_API,
        "kind": "NodeConfig",
        "spec": {"kubelet": {"config": fields}},
    }


def al2023_toolkit_script() -> str:
    """The shell part of every AL2023 pool's userData: the AMI's own NVIDIA Container
    Toolkit refuses ``NVIDIA_VISIBLE_DEVICES`` from unprivileged containers and accepts
    the device plugin's volume mounts (:data:`gpuplan.lower.operator.NODE_TOOLKIT_SETTINGS`;
    the operator's plugin runs with ``DEVICE_LIST_STRATEGY=volume-mounts`` when the toolkit
    is preinstalled, which it always is beside AL2023 pools, GP640). The AMI makes
    ``nvidia`` containerd's default runtime (awslabs/amazon-eks-ami@81fec2e8
    nodeadm/internal/containerd/runtime_config_nvidia.go:25-35), so without this any
    pod whose image sets ``NVIDIA_VISIBLE_DEVICES=all`` sees every GPU of the node.
    ``nvidia-ctk config --in-place --set`` exists from toolkit v1.14.0
    (NVIDIA/nvidia-container-toolkit@v1.14.0 cmd/nvidia-ctk/config/config.go:72-81)."""
    from gpuplan.lower.operator import NODE_TOOLKIT_SETTINGS

    sets = " ".join(f"--set {k}={v}" for k, v in NODE_TOOLKIT_SETTINGS)
    return ("#!/bin/bash\n"
            "# gpuplan: NVIDIA_VISIBLE_DEVICES is inert for unprivileged pods; GPUs arrive as volume mounts\n"
            "set -euo pipefail\n"
            f"nvidia-ctk config --in-place {sets}\n")


# What may reach the MIG script: catalog profile names with a placement start, GPU indices.
MIG_TOKEN = re.compile(r"(?:[0-9]+c\.)?[0-9]+g\.[0-9]+gb(?:[+-][a-z.]+)?(?::[0-9]+)?")


@dataclass(frozen=True)
class BootGpu:
    """One ``mode``/``gpu`` call of the MIG script: a GPU index (None: every GPU of the node),
    its MIG mode, and the GPU instances to create at their placements."""

    index: int | None
    mode: str  # "Enabled" | "Disabled"
    instances: int = 0
    create: tuple[str, ...] = ()  # "<gi profile>:<start>", each with its default compute instance
    compute: tuple[tuple[str, str], ...] = ()  # ("<gi profile>:<start>", "<c>c.<gi profile>")

    @property
    def args(self) -> str:
        words = [str(self.instances), "'" + ",".join(self.create) + "'"]
        words += [w for gi, ci in self.compute for w in (gi, ci)]
        return " ".join(words)


def boot_gpus(pv: PoolView) -> tuple[int | None, list[BootGpu]]:
    """(GPUs a node must have, None when the pool does not know; the per-GPU MIG calls).

    From the pool's mig-parted entries (:func:`gpuplan.identity.pool_entries`, the operator
    path's own source), each layout placed by gpuplan's geometry engine
    (:func:`gpuplan.mig.check_layout`): every GPU instance is created at the memory slice the
    engine chose, so the driver's default placement, which depends on the order of creation
    (mig-parted walks permutations until one fits, NVIDIA/mig-parted@v0.15.0
    pkg/mig/config/config.go:125, ``iteratePermutationsUntilSuccess``), never decides. A
    ``<c>c.`` profile gets its GPU instance and one compute instance of that profile, as the
    engine counts it."""
    from gpuplan.catalog import parse_profile_name
    from gpuplan.identity import pool_entries
    from gpuplan.mig import check_layout

    assert pv.gpu is not None, "a MIG pool has a known GPU (rules check it)"
    n = pv.gpus_per_node or None
    out: list[BootGpu] = []
    for entry in pool_entries(pv):
        devices = entry["devices"]
        indices: list[int | None] = (list(range(n)) if n else [None]) if devices == "all" else list(devices)
        layout = entry.get("mig-devices") if entry["mig-enabled"] else None
        if layout is None:
            out.extend(BootGpu(i, "Disabled") for i in indices)
            continue
        check = check_layout(pv.gpu, layout)
        assert check.ok, f"pool {pv.name}: rules refuse a layout the geometry engine cannot place"
        create: list[str] = []
        compute: list[tuple[str, str]] = []
        for p in check.placements:
            parsed = parse_profile_name(p.profile)
            gi = parsed.gi_name if parsed is not None and parsed.compute is not None else p.profile
            if gi == p.profile:
                create.append(f"{gi}:{p.start}")
            else:
                compute.append((f"{gi}:{p.start}", p.profile))
        for tok in [*create, *(w for pair in compute for w in pair)]:
            assert MIG_TOKEN.fullmatch(tok), tok
        out.extend(BootGpu(i, "Enabled", len(check.placements), tuple(create), tuple(compute)) for i in indices)
    out.sort(key=lambda g: (g.index is not None, g.index or 0))
    return n, out


def al2023_mig_script(pv: PoolView) -> str | None:
    """The shell part of a Karpenter AL2023 MIG pool's userData: the pool's layout, applied
    before kubelet starts (None for other pools). docs/karpenter.md "MIG at boot".

    - The EKS AL2023 NVIDIA AMI ships ``nvidia-smi`` and no ``nvidia-mig-parted``
      (awslabs/amazon-eks-ami@v20260724 templates/al2023/provisioners/install-nvidia-driver.sh:
      265-279 installs the toolkit, persistenced, ``nvidia-driver-cuda`` and fabric manager;
      set-nvidia-clocks.service:6 relies on /usr/bin/nvidia-smi), so the script drives
      ``nvidia-smi`` itself.
    - Before kubelet: nodeadm-run.service, which starts kubelet (nodeadm init
      ``runDaemons``, nodeadm/internal/kubelet/daemon.go:53-55), runs
      ``After=nodeadm-config.service cloud-final.service`` (templates/al2023/runtime/rootfs/
      etc/systemd/system/nodeadm-run.service:6), and kubelet.service is not enabled on its
      own (install-nodeadm.sh:57-60 enables only the nodeadm units). cloud-init runs user
      scripts in cloud-final, once per instance (canonical/cloud-init@26.2
      cloudinit/config/cc_scripts_user.py:23), and ``/var/lib/cloud/scripts/per-boot`` on
      every boot before them (cc_scripts_per_boot.py:20,31; config/cloud.cfg.tmpl:208-210):
      the script installs itself there, because GPU instances are lost on reboot.
    - MIG mode: set per GPU; a change the GPU cannot take without a reset stays pending
      (``mig.mode.pending``), and the script reboots once (marker file), after which the
      pending mode is current.
    - Failure (no driver, a mode still pending after the reboot, an instance that cannot be
      created): the instance powers off before nodeadm-run, so it never registers.
      Karpenter deletes a NodeClaim whose node has not registered 15 minutes after launch
      and launches a replacement (kubernetes-sigs/karpenter@v1.14.1
      pkg/controllers/nodeclaim/lifecycle/liveness.go:51-55, 92-109), sooner with an
      interruption queue, which handles the instance's ``stopping``/``stopped`` event
      like an interruption (aws/karpenter-provider-aws@v1.14.1
      pkg/controllers/interruption/messages/statechange/model.go:40-45,
      pkg/controllers/interruption/utils.go:206-213)."""
    from gpuplan.identity import boot_mig
    from gpuplan.render.text import render

    if not boot_mig(pv):
        return None
    count, gpus = boot_gpus(pv)
    assert pv.gpu is not None
    return render("mig-al2023.sh.j2", pool=pv.name, model=pv.gpu.key, count=count, gpus=gpus)


def al2023_userdata(pv: PoolView) -> str:
    """MIME multipart: the toolkit script part, on MIG pools the MIG script part
    (:func:`al2023_mig_script`) and, when the pool sets kubelet topology fields, one
    ``application/node.eks.aws`` NodeConfig part."""
    from gpuplan.render.text import render
    from gpuplan.render.yamlwriter import dump

    nc = al2023_nodeconfig(pv)
    text = dump(nc).rstrip("\n") + "\n" if nc is not None else ""
    scripts = [al2023_toolkit_script()]
    if (mig := al2023_mig_script(pv)) is not None:
        scripts.append(mig)
    assert AL2023_BOUNDARY not in text and all(AL2023_BOUNDARY not in s for s in scripts)
    return render("userdata-al2023.j2", boundary=AL2023_BOUNDARY, nodeconfig=text, scripts=scripts)


def bottlerocket_userdata(pv: PoolView) -> str | None:
    from gpuplan.render.text import render

    kube, opts = bottlerocket_settings(pv)
    plugin, slicing = bottlerocket_device_plugin(pv)
    if not (kube or opts or plugin):
        return None
    return render("userdata-bottlerocket.j2", kubernetes=kube, policy_options=opts,
                  device_plugin=plugin, time_slicing=slicing)


def userdata(pv: PoolView) -> str | None:
    k = pv.pool.karpenter
    assert k is not None
    if k.ami_family == "Bottlerocket":
        return bottlerocket_userdata(pv)
    return al2023_userdata(pv)


def _block_devices(pv: PoolView) -> list[dict[str, Any]]:
    k = pv.pool.karpenter
    assert k is not None
    ebs = {"volumeSize": GPU_VOLUME_SIZE, "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}
    if k.ami_family == "Bottlerocket":
        # xvda: the OS image; xvdb: the data volume (containerd, kubelet root).
        return [
            {"deviceName": "/dev/xvda",
             "ebs": {"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}},
            {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": ebs},
        ]
    return [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": ebs}]


def instance_store_raid0(pv: PoolView) -> bool:
    """Every instance type of the pool has local NVMe (p4d/p4de/p5: 8 drives): Karpenter's
    ``instanceStorePolicy: RAID0`` stripes them into one array that holds kubelet's and
    containerd's state (images and emptyDir: the node's ephemeral storage) instead of the
    EBS root volume. On AL2023 Karpenter asks nodeadm for it
    (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go:87-88,
    NodeConfig ``spec.instance.localStorage.strategy: RAID0``). AL2023 only: on Bottlerocket
    Karpenter adds ``apiclient ephemeral-storage`` bootstrap commands (bottlerocket.go:96-106),
    settings whose first Bottlerocket release gpuplan has not pinned (GP644 could not check a
    pinned ``amiVersion`` against them). Not set when one of the types has no instance store:
    Karpenter would then size ephemeral storage from the root volume on some nodes and from
    the array on others."""
    from gpuplan.cloud.aws import instance_type

    k = pv.pool.karpenter
    assert k is not None
    if k.ami_family != "AL2023":
        return False
    types = [instance_type(name) for name in k.instance_types]
    return bool(types) and all(t is not None and t.local_nvme_gib > 0 for t in types)


def pool_efa(rf: ResolvedFleet, pv: PoolView) -> int:
    """EFA interfaces per node the pool's multi-node jobs request (0: EFA off): the
    ``vpc.amazonaws.com/efa`` of :func:`gpuplan.identity.pool_gang_resources`, decided in the AWS
    platform's home (:func:`gpuplan.cloud.aws.gang_pod_resources`).

    Nothing in the NodePool or EC2NodeClass turns EFA on: Karpenter attaches one EFA interface
    per network card (card 0 device 0, the others device 1, AWS's recommended layout) to a node
    launched for a pod that requests ``vpc.amazonaws.com/efa``
    (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go:699-720,
    pkg/providers/launchtemplate/launchtemplate.go:334-351), and advertises the resource on
    the NodeClaim only then (pkg/cloudprovider/cloudprovider.go:442-446). The EC2NodeClass's
    own ``networkInterfaces`` would attach EFA to every node, but cannot make the primary
    interface an EFA (``interfaceType`` is ``interface`` or ``efa-only``,
    pkg/apis/v1/ec2nodeclass.go:562-563, and EC2 refuses an EFA-only primary), so it loses a
    card; and one list cannot fit instance types with different card counts."""
    from gpuplan.cloud.aws import EFA
    from gpuplan.identity import pool_gang_resources

    return pool_gang_resources(rf, pv).get(EFA, 0)


def capacity_reservation_terms(pv: PoolView) -> list[dict[str, Any]]:
    """``capacityReservationSelectorTerms``: the pool's reservations, by id or by tags (and owner).
    Karpenter offers ``reserved`` capacity only from the reservations these select
    (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instancetype/offering/
    reserved_capacity_resolver.go:67-91; feature gate ReservedCapacity, on by default:
    kubernetes-sigs/karpenter@v1.14.1 pkg/operator/options/options.go:134)."""
    k = pv.pool.karpenter
    assert k is not None
    out: list[dict[str, Any]] = []
    for r in k.capacity_reservations or ():
        if r.id is not None:
            out.append({"id": r.id})
        else:
            term: dict[str, Any] = {"tags": dict(r.tags or {})}
            if r.owner_id is not None:
                term["ownerID"] = r.owner_id
            out.append(term)
    return out


def ec2nodeclass(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    aws = rf.fleet.spec.cluster.aws
    assert aws is not None, "GP614 stops a Karpenter pool without cluster.aws before lowering"
    discovery = {DISCOVERY_TAG: aws.cluster_name}
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias(pv)}],
        "role": aws.node_role,
        "subnetSelectorTerms": [{"tags": dict(aws.subnet_tags or discovery)}],
        "securityGroupSelectorTerms": [{"tags": dict(aws.security_group_tags or discovery)}],
        "blockDeviceMappings": _block_devices(pv),
        "metadataOptions": dict(METADATA_OPTIONS),
        "tags": {POOL_LABEL: pv.name, "gpuplan.dev/fleet": rf.fleet.metadata.name},
    }
    if (terms := capacity_reservation_terms(pv)):
        spec["capacityReservationSelectorTerms"] = terms
    if instance_store_raid0(pv):
        spec["instanceStorePolicy"] = "RAID0"
    ud = userdata(pv)
    if ud is not None:
        spec["userData"] = ud
    meta = metadata(rf, pv.name, extra_labels={POOL_LABEL: pv.name},
                    annotations=object_annotations(rf, "EC2NodeClass") or None)
    return obj(NODECLASS_API, "EC2NodeClass", meta, spec=spec)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    from gpuplan.provisioning.pools import karpenter_cloud

    pools = karpenter_pools(rf)
    if karpenter_cloud(rf.fleet.spec.cluster) != "aws":
        return []  # AKSNodeClasses: gpuplan.lower.karpenter_azure
    if pools and rf.fleet.spec.cluster.aws is None:
        return []  # GP614 is an error: compile stops before lowering
    return [Artifact(path=f"pools/{pv.name}/ec2nodeclass.yaml", documents=(ec2nodeclass(rf, pv),),
                     description=f"Karpenter EC2NodeClass of pool {pv.name} (AMI, role, userData with "
                                 "node toolkit, kubelet topology and MIG layout settings)") for pv in pools]
