"""GP640-GP652, GP655, GP990-GP991: GPU Operator choices that hold for the whole fleet — container
toolkit and CDI, the managed driver's version (against each static pool's GPU, GP650,
and OS, GP651), what runs on Bottlerocket nodes.

Why these are fleet-wide: the operator renders one ClusterPolicy, and what one
operand is told about another (the device plugin's CDI hook path, the driver
root) is the same on every node (docs/output-reference.md, "GPU Operator").

Stage: check (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Iterator

from gpuplan.codes import Code
from gpuplan.identity import CHART_DEFAULT_DRIVER
from gpuplan.provisioning.pools import karpenter_pool, operator_runs_driver, title
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

E_TOOLKIT_MIX = Code(
    "GP640", "operator toolkit on nodes that ship their own", Severity.ERROR,
    "`gpuOperator.toolkit: managed` (the default for fleets of static nodes) installs the operator's "
    "NVIDIA Container Toolkit on every GPU node, "
    "and with CDI (the chart default) the device plugin's `NVIDIA_CDI_HOOK_PATH` points into that "
    "toolkit's install dir on every node (NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:"
    "1527-1535). The EKS AL2023 NVIDIA AMIs of Karpenter pools ship their own toolkit and runtime "
    "configuration; switching the operator's toolkit off on just those nodes leaves the hook path "
    "pointing at nothing and GPU pods fail to start. The toolkit is one choice for the whole fleet: "
    "with Karpenter AL2023 pools it is `preinstalled` (the default when every pool is one; static nodes "
    "beside them need the toolkit installed and `toolkit: preinstalled` said explicitly).",
    bad="gpuOperator: {toolkit: managed}\npools:\n  - {name: burst, karpenter: {amiFamily: AL2023, ...}}",
    good="gpuOperator: {toolkit: preinstalled}\npools:\n  - {name: burst, karpenter: {amiFamily: AL2023, ...}}",
)
E_DRIVER_VERSION = Code(
    "GP641", "driver version not understood", Severity.ERROR,
    "`driverVersion` is either a driver branch, `R` and three digits (`R535`: the GPU Operator uses "
    "precompiled driver images `<branch>-<kernel version>-<os tag>`), or a full driver version such as `535.104.05` "
    "(the compiled driver image of that release). Words such as `latest` name no image the operator "
    "can pull.",
    bad="gpuOperator: {driver: managed, driverVersion: latest}",
    good="gpuOperator: {driver: managed, driverVersion: 535.104.05}",
)
W_DRIVER_FLOATS = Code(
    "GP642", "managed driver version not pinned", Severity.WARNING,
    "Without `driverVersion` gpuplan writes the chart's own default driver for `chartVersion` "
    "(595.91.07 for v26.7.0), so a chart bump shows up as a driver change in `gpuplan diff`. For a "
    "chart version whose default gpuplan does not know, nothing is written: the chart's default then "
    "changes with the chart, and with `driverUpgrade.autoUpgrade` (the chart default) a bump replaces "
    "the driver on every node and evicts their GPU pods. Pin the driver.",
    bad="gpuOperator: {chartVersion: v26.9.0, driver: managed}",
    good="gpuOperator: {chartVersion: v26.9.0, driver: managed, driverVersion: 595.91.07}",
)
E_BOTTLEROCKET_SHARING = Code(
    "GP643", "sharing mode Bottlerocket's device plugin cannot do", Severity.ERROR,
    "NVIDIA does not support the GPU Operator's operands on Bottlerocket; gpuplan turns them off on "
    "Bottlerocket nodes (`nvidia.com/gpu.deploy.operands: \"false\"`) and configures Bottlerocket's own "
    "device plugin through `settings.kubelet-device-plugins.nvidia`. gpuplan has it do whole GPUs and "
    "time-slicing only: no mig-manager runs on these nodes, and MPS has no setting. Bottlerocket's own "
    "MIG settings (`device-partitioning-strategy = \"mig\"`, one `mig.profile` per GPU model) cannot "
    "express a mixed or per-GPU layout and are not written. On AL2023 the userData applies the layout "
    "before kubelet starts.",
    bad="karpenter: {amiFamily: Bottlerocket, ...}\nsharing: {mode: mig, layout: {1g.10gb: 7}}",
    good="karpenter: {amiFamily: AL2023, ...}\nsharing: {mode: mig, layout: {1g.10gb: 7}}",
)
E_BOTTLEROCKET_VERSION = Code(
    "GP644", "Bottlerocket release lacks a setting gpuplan writes", Severity.ERROR,
    "Each Bottlerocket setting exists from a release on: `settings.kubernetes.cpu-manager-policy` from "
    "v1.0.8, `topology-manager-policy`/`-scope` from v1.2.0, the NVIDIA device plugin's "
    "`device-sharing-strategy` and `time-slicing.*` from v1.25.0 (bottlerocket-os/bottlerocket "
    "CHANGELOG.md, sources/settings-migrations/). An older pinned `amiVersion` rejects the userData and "
    "the node never joins.",
    bad="karpenter: {amiFamily: Bottlerocket, amiVersion: v1.20.0}\nsharing: {mode: time-slicing, replicas: 4}",
    good="karpenter: {amiFamily: Bottlerocket, amiVersion: v1.40.0}\nsharing: {mode: time-slicing, replicas: 4}",
)

E_DRIVER_FLOOR = Code(
    "GP650", "driver older than the GPU", Severity.ERROR,
    "A driver release supports only the GPUs it lists; below the first release that lists a GPU the "
    "driver does not bind it and the node comes up without GPUs. gpuplan keeps, per GPU model, the first "
    "release whose \"Compatible GPUs\" table lists one of the model's PCI device ids, read from every tagged "
    "release of NVIDIA/open-gpu-kernel-modules (`gpuplan/catalog/drivers.json`, rebuilt by "
    "`python -m gpuplan.catalog.build_drivers`): e.g. B200 from 570.86.15, RTX PRO 6000 Blackwell Server "
    "from 575.57.08, H200 SXM from 550.40.65. Hopper, Ada and Blackwell models are checked; older "
    "architectures were supported before those modules existed and are not. The driver of a static pool "
    "is `gpuOperator.driverVersion` (or the chart's default); Karpenter pools run their AMI's driver. "
    "MIG profiles have floors of their own (GP205).",
    bad="gpuOperator: {driverVersion: 535.104.05}\npools:\n  - {name: train, gpu: B200, gpusPerNode: 8, nodes: [n1]}",
    good="gpuOperator: {driverVersion: 595.91.07}\npools:\n  - {name: train, gpu: B200, gpusPerNode: 8, nodes: [n1]}",
)
E_PRECOMPILED_OS = Code(
    "GP651", "precompiled driver on an OS that has none", Severity.ERROR,
    "`driverVersion: R<branch>` makes the GPU Operator use precompiled driver images "
    "(`driver.usePrecompiled: true`), which NVIDIA builds as a tech preview for Ubuntu 22.04 kernels only "
    "(NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml:149-151). On any other OS the "
    "driver image does not exist and the driver pod never starts. Every static pool's `os` must be "
    "`ubuntu22.04` (gpuplan cannot see the nodes' OS otherwise), or the version a full release.",
    bad="gpuOperator: {driverVersion: R570}\npools:\n  - {name: train, gpu: L40S, gpusPerNode: 4, nodes: [n1]}",
    good="gpuOperator: {driverVersion: R570}\npools:\n  - {name: train, gpu: L40S, gpusPerNode: 4, nodes: [n1], "
         "os: ubuntu22.04}",
)

E_POOL_DRIVER_UNMANAGED = Code(
    "GP652", "pool driver the operator does not install", Severity.ERROR,
    "`pools[].driverVersion` becomes the pool's own NVIDIADriver, which the GPU Operator installs on the "
    "pool's static nodes. Karpenter pools run the driver of their EKS AMI (the operator's driver is off there, "
    "`nvidia.com/gpu.deploy.driver: \"false\"`), and with `gpuOperator.driver: preinstalled` the operator "
    "installs none: the setting would change nothing on the nodes.",
    bad="pools:\n  - {name: burst, gpu: H100-SXM5-80GB, karpenter: {...}, driverVersion: 570.133.20}",
    good="pools:\n  - {name: train, gpu: H100-SXM5-80GB, gpusPerNode: 8, nodes: [n1], driverVersion: 570.133.20}",
)

I_AMI_DRIVER_UNCHECKED = Code(
    "GP655", "AMI driver not checked", Severity.INFO,
    "A Karpenter pool runs the NVIDIA driver its EKS AMI ships. gpuplan knows, per EKS AL2023 AMI release, "
    "the driver of its NVIDIA AMIs (the `kmod-nvidia-latest-dkms` rows of the AMI release notes, "
    "awslabs/amazon-eks-ami CHANGELOG.md; `gpuplan/catalog/ami_drivers.json`, rebuilt by "
    "`python -m gpuplan.catalog.build_ami_drivers`) and checks it against the GPU's driver floor (GP650). "
    "A release the table does not know (newer than the table, or any Bottlerocket release, whose notes "
    "gpuplan does not read) is not an error: its driver is simply not checked.",
    bad="karpenter: {instanceTypes: [p6-b200.48xlarge], amiFamily: Bottlerocket, amiVersion: v1.40.0}",
    good="karpenter: {instanceTypes: [p6-b200.48xlarge], amiFamily: AL2023, amiVersion: v20260714}",
)

E_RUNTIME_HANDLERS = Code(
    "GP990", "GPU nodes name their NVIDIA runtime differently", Severity.ERROR,
    "The GPU Operator creates one RuntimeClass, named and handled by `operator.runtimeClass` "
    "(NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:5178-5190), and gives it to every "
    "operand pod (:2747-2753). containerd runs a pod only with a handler its config defines. AKS and "
    "AKS Node Auto Provisioning nodes define `nvidia-container-runtime` (Azure/AgentBaker "
    "pkg/agent/baker.go:1962; Azure/karpenter-provider-azure@v1.14.2 "
    "pkg/providers/imagefamily/bootstrap/containerd.toml.gtpl:7), the EKS AL2023 NVIDIA AMIs and the "
    "operator's own toolkit `nvidia` (gpuplan/upstream/nodes/). One fleet cannot serve both: the "
    "operands would never start on one kind of node.",
    bad="pools:\n  - {name: aks-a, aks: {...}}      # nvidia-container-runtime\n"
        "  - {name: rack, nodes: [...]}      # toolkit preinstalled: nvidia",
    good="one cluster per runtime, or gpuOperator.toolkit: managed where the nodes allow it",
)
W_ENVVAR_OPEN = Code(
    "GP991", "NVIDIA_VISIBLE_DEVICES stays open on the pool's nodes", Severity.WARNING,
    "gpuplan makes `NVIDIA_VISIBLE_DEVICES` inert for unprivileged containers by telling the node's "
    "container toolkit to refuse it and hand GPUs over as volume mounts. On AKS agent pools and AKS "
    "Node Auto Provisioning the toolkit is AKS's, containerd's default runtime is "
    "`nvidia-container-runtime` (Azure/AgentBaker pkg/agent/baker.go:1962), and neither the agent pool "
    "nor the AKSNodeClass has a field for node configuration (gpuplan/upstream/nodes/aks.json "
    "`nodeConfig`): the device plugin keeps its `envvar` strategy (the only one AKS's toolkit serves; "
    "`volume-mounts` would make every GPU container fail), so a container that requests no GPU on "
    "these nodes and whose image sets `NVIDIA_VISIBLE_DEVICES=all` (every CUDA base image) sees every GPU "
    "of its node. gpuplan's admission policies still keep non-tier pods off GPU nodes and refuse the "
    "variable in pod specs; an image's own environment is out of their sight.",
    bad="pools:\n  - {name: train, aks: {vmSize: Standard_ND96isr_H100_v5, driver: aks}}",
    good="pools:\n  - {name: train, aks: {vmSize: Standard_ND96isr_H100_v5, driver: gpu-operator}}\n"
         "# with gpuOperator: {driver: managed, toolkit: managed}: the operator's toolkit refuses the variable",
)
CODES = (E_RUNTIME_HANDLERS, W_ENVVAR_OPEN, E_TOOLKIT_MIX, E_DRIVER_VERSION, W_DRIVER_FLOATS, E_BOTTLEROCKET_SHARING,
         E_BOTTLEROCKET_VERSION, E_DRIVER_FLOOR, E_PRECOMPILED_OS, E_POOL_DRIVER_UNMANAGED,
         I_AMI_DRIVER_UNCHECKED)

# the only OS the GPU Operator's precompiled driver images are built for
# (NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml:149-151)
PRECOMPILED_OS = "ubuntu22.04"

# R535 (a branch), or 535.104.05 / 550.54 (a release)
_BRANCH = re.compile(r"R[0-9]{3}\Z")
_RELEASE = re.compile(r"[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?\Z")

# The Bottlerocket release that introduced each setting gpuplan writes
# (bottlerocket-os/bottlerocket CHANGELOG.md and sources/settings-migrations/):
# cpu-manager-policy v1.0.8 (#1388); topology-manager-policy/scope v1.2.0
# (archived/v1.2.0/kubelet-topology-manager, #1659); the NVIDIA device plugin's
# sharing settings v1.25.0 (v1.25.0/kubelet-device-plugins-time-slicing-settings,
# #4230). topology-manager-policy-options is not listed: its release could not be
# read from the pinned sources, so it is not checked (docs/karpenter.md).
BOTTLEROCKET_SINCE = {
    "kubernetes.cpu-manager-policy": (1, 0, 8),
    "kubernetes.topology-manager-policy": (1, 2, 0),
    "kubernetes.topology-manager-scope": (1, 2, 0),
    "kubelet-device-plugins.nvidia.device-sharing-strategy": (1, 25, 0),
    "kubelet-device-plugins.nvidia.time-slicing.replicas": (1, 25, 0),
    "kubelet-device-plugins.nvidia.time-slicing.rename-by-default": (1, 25, 0),
    "kubelet-device-plugins.nvidia.time-slicing.fail-requests-greater-than-one": (1, 25, 0),
}
_BR_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)\Z")


def bottlerocket_setting_keys(pv) -> list[str]:
    """Dotted ``settings.*`` keys (without ``settings.``) the pool's Bottlerocket userData sets."""
    from gpuplan.identity import bottlerocket_device_plugin, bottlerocket_settings

    kube, opts = bottlerocket_settings(pv)
    plugin, slicing = bottlerocket_device_plugin(pv)
    return ([f"kubernetes.{k}" for k, _ in kube]
            + [f"kubernetes.topology-manager-policy-options.{k}" for k, _ in opts]
            + [f"kubelet-device-plugins.nvidia.{k}" for k, _ in plugin]
            + [f"kubelet-device-plugins.nvidia.time-slicing.{k}" for k, _ in slicing])


def valid_driver_version(v: str) -> bool:
    return bool(_BRANCH.match(v) or _RELEASE.match(v))


def bottlerocket_version(ami_version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a pinned Bottlerocket AMI version; None for ``latest``/unknown."""
    m = _BR_VERSION.match(ami_version)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _at(rf: ResolvedFleet, base: tuple, key: str) -> tuple[tuple, bool]:
    """(path, key?) for a diagnostic about ``base.key``: its value when the
    spec writes it, else the key of the nearest written parent."""
    path = base + (key,)
    if path in rf.doc.value_pos:
        return path, False
    while base and base not in rf.doc.key_pos:
        base = base[:-1]
    return base, True


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    op = rf.fleet.spec.cluster.gpu_operator
    opath = ("spec", "cluster", "gpuOperator")
    from gpuplan.provisioning.pools import karpenter_cloud, karpenter_node_toolkit

    al2023 = [pv for pv in rf.pools if karpenter_node_toolkit(rf.fleet.spec.cluster, pv.pool)]
    if al2023 and rf.toolkit != "preinstalled":
        pv = al2023[0]
        where, on_key = _at(rf, opath, "toolkit")
        image = ("AKS's node bootstrap, which installs the NVIDIA container runtime with its driver,"
                 if karpenter_cloud(rf.fleet.spec.cluster) == "azure" else "the EKS AL2023 NVIDIA AMI,")
        if op.toolkit == "managed":
            msg = (f"pool {pv.name!r} runs {image} which ships its own container toolkit, but "
                   "gpuOperator.toolkit is managed: the device plugin's CDI hook would point at the operator's "
                   "toolkit, which these nodes do not have")
        else:
            msg = (f"pool {pv.name!r} runs {image} which ships its own container toolkit, and "
                   "the fleet has static pools: choose gpuOperator.toolkit for the whole fleet")
        yield rf.diag(
            E_TOOLKIT_MIX, msg, where, key=on_key,
            hint="set gpuOperator.toolkit: preinstalled (and install the toolkit on the static nodes), or move the "
                 "pool to static nodes",
        )
    if op.driver_version is not None:
        # checked whatever `driver` says: the MIG rules read it too (profiles per driver branch)
        if not valid_driver_version(op.driver_version):
            yield rf.diag(
                E_DRIVER_VERSION,
                f"driverVersion {op.driver_version!r} is neither a driver branch (R535) nor a driver release "
                "(535.104.05)",
                opath + ("driverVersion",),
                hint="use a release such as 595.91.07 (the chart's default in v26.7.0), or a branch such as R580",
            )
    elif op.driver == "managed" and op.chart_version not in CHART_DEFAULT_DRIVER:
        where, on_key = _at(rf, opath, "driver")
        yield rf.diag(
            W_DRIVER_FLOATS,
            f"gpuplan does not know the default driver of chart {op.chart_version}: the managed driver is not "
            "pinned and changes, on every node, with the chart",
            where, key=on_key,
            hint="pin it: driverVersion: <the release you run>, e.g. 595.91.07 (the v26.7.0 default), or a "
                 "branch such as R580",
        )
    yield from _driver_checks(rf)
    yield from _runtime_checks(rf)
    for pv in rf.pools:
        k = pv.pool.karpenter
        if k is None or k.ami_family != "Bottlerocket":
            continue
        mode = pv.pool.sharing.mode
        if mode in ("mig", "mps"):
            yield rf.diag(
                E_BOTTLEROCKET_SHARING,
                f"pool {pv.name!r}: Bottlerocket's own device plugin cannot do {mode}, and the GPU Operator's "
                "operands (mig-manager, its device plugin) do not run on Bottlerocket",
                pv.path + ("sharing", "mode"),
                hint="use amiFamily: AL2023 for this pool, or sharing exclusive / time-slicing",
            )
            continue
        have = bottlerocket_version(k.ami_version)
        if have is None:
            continue  # latest: every setting exists
        missing = [(since, key) for key in bottlerocket_setting_keys(pv)
                   if (since := BOTTLEROCKET_SINCE.get(key)) is not None and have < since]
        if missing:
            since, key = max(missing)
            want = "v" + ".".join(map(str, since))
            yield rf.diag(
                E_BOTTLEROCKET_VERSION,
                f"pool {pv.name!r}: the userData sets settings.{key}, which Bottlerocket has from {want} on; "
                f"amiVersion is {k.ami_version}",
                pv.path + ("karpenter", "amiVersion"),
                hint=f"pin amiVersion {want} or later",
            )


def _runtime_checks(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.provisioning.runtime import runtime_handlers, unconfigurable_toolkit_pools

    handlers = runtime_handlers(rf)
    if len(handlers) > 1:
        (first, a), *rest = sorted(handlers.items(), key=lambda kv: rf.pools.index(kv[1][0]))
        other, b = rest[0]
        pv = b[0]
        yield rf.diag(E_RUNTIME_HANDLERS, f"pool {pv.name!r}: its nodes run GPU containers with containerd runtime "
                      f"{other!r}, pool {a[0].name!r}'s with {first!r}; the GPU Operator gives all its operands one "
                      "RuntimeClass", pv.path, key=True,
                      hint="serve these pools from separate clusters, or let the GPU Operator install the toolkit "
                           "on both (gpuOperator.toolkit: managed, aks.driver: gpu-operator)")
    for pv in unconfigurable_toolkit_pools(rf):
        yield rf.diag(W_ENVVAR_OPEN, f"pool {pv.name!r}: its nodes' container toolkit is the platform's and accepts "
                      "NVIDIA_VISIBLE_DEVICES from any container; an image that sets it sees every GPU of the node",
                      pv.path, key=True,
                      hint="let the GPU Operator install driver and toolkit on this pool (driver: gpu-operator, "
                           "gpuOperator: {driver: managed, toolkit: managed}): the operator's toolkit refuses the variable")


def _driver_checks(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """GP641 for pool versions, GP652 (a pool driver nothing installs), GP650 (a static
    pool's GPU needs a newer driver) and GP651 (precompiled driver images where the pool's
    OS has none)."""
    from gpuplan.catalog.drivers import below_floor
    from gpuplan.identity import pool_driver_version

    op = rf.fleet.spec.cluster.gpu_operator
    opath = ("spec", "cluster", "gpuOperator")
    unsaid_os = []
    for pv in rf.pools:
        own = pv.pool.driver_version
        if own is not None:
            if not valid_driver_version(own):
                yield rf.diag(E_DRIVER_VERSION,
                              f"pool {pv.name!r}: driverVersion {own!r} is neither a driver branch (R535) nor a "
                              "driver release (535.104.05)", pv.path + ("driverVersion",),
                              hint="use a release such as 595.91.07, or a branch such as R580")
                continue
            if not operator_runs_driver(pv.pool) or op.driver != "managed":
                why = ("runs the driver of its EKS AMI" if karpenter_pool(pv.pool)
                       else f"runs the driver its {title(pv.pool)} installs" if not operator_runs_driver(pv.pool)
                       else "gets no driver from the operator (gpuOperator.driver: preinstalled)")
                yield rf.diag(E_POOL_DRIVER_UNMANAGED,
                              f"pool {pv.name!r} {why}: its driverVersion changes nothing on its nodes",
                              pv.path + ("driverVersion",), key=True,
                              hint="remove the pool's driverVersion" + (
                                  "; pin the AMI with karpenter.amiVersion" if karpenter_pool(pv.pool) else ""))
                continue
        if not operator_runs_driver(pv.pool):
            if karpenter_pool(pv.pool):
                yield from _ami_driver(rf, pv)
            continue
        version = pool_driver_version(rf, pv)
        if version is None or not valid_driver_version(version):
            continue  # no driver gpuplan knows of, or GP641 at the fleet's driverVersion
        where = pv.path + ("driverVersion",) if own is not None else opath + ("driverVersion",)
        said = (f"driverVersion {version}" if own is not None or op.driver_version
                else f"the chart's default driver {version}")
        if pv.gpu is not None and (need := below_floor(pv.gpu.key, version)) is not None:
            yield rf.diag(
                E_DRIVER_FLOOR,
                f"pool {pv.name!r}: {pv.gpu.key} needs driver {need} or later (the first release that lists it); "
                f"the pool's nodes run {said}",
                pv.path + ("gpu",),
                hint=f"set {'the pool' if own is not None else 'gpuOperator'}.driverVersion to {need} or later "
                     "(595.91.07 is the v26.7.0 chart's default)",
            )
        if op.driver == "managed" and _BRANCH.match(version) and pv.pool.os != PRECOMPILED_OS:
            if own is not None:
                yield _precompiled(rf, version, [pv], where)
            else:
                unsaid_os.append(pv)
    if unsaid_os and op.driver_version is not None:
        yield _precompiled(rf, op.driver_version, unsaid_os, opath + ("driverVersion",))


def _ami_driver(rf: ResolvedFleet, pv) -> Iterator[Diagnostic]:
    """GP650 / GP655 for a Karpenter pool: the driver its pinned EKS AMI release ships
    (:func:`gpuplan.catalog.drivers.ami_driver`) against its GPU's floor. ``latest`` is
    GP613's; a GPU without a floor has nothing to check."""
    from gpuplan.catalog.drivers import ami_driver, below_floor, driver_floor, newest_known_ami

    k = pv.pool.karpenter
    if k is None or k.ami_version == "latest" or pv.gpu is None or driver_floor(pv.gpu.key) is None:
        return
    where = pv.path + ("karpenter", "amiVersion")
    on_key = where not in rf.doc.value_pos
    if on_key:
        where = pv.path + ("karpenter",)
    driver = ami_driver(k.ami_family, k.ami_version)
    if driver is None:
        yield rf.diag(
            I_AMI_DRIVER_UNCHECKED,
            f"pool {pv.name!r}: gpuplan does not know which NVIDIA driver {k.ami_family} {k.ami_version} ships; "
            f"{pv.gpu.key}'s driver floor ({driver_floor(pv.gpu.key).first}) is not checked",  # type: ignore[union-attr]
            where, key=on_key,
            hint=("Bottlerocket's drivers are not in the table: check the driver of the release in its notes "
                  "(bottlerocket-os/bottlerocket CHANGELOG.md)" if k.ami_family != "AL2023" else
                  f"pin a release gpuplan knows (the newest: amiVersion: {newest_known_ami('AL2023')}), or look up "
                  f"the kmod-nvidia-latest-dkms row of {k.ami_version} in the AMI release notes "
                  "(awslabs/amazon-eks-ami CHANGELOG.md)"),
        )
        return
    if (need := below_floor(pv.gpu.key, driver)) is not None:
        yield rf.diag(
            E_DRIVER_FLOOR,
            f"pool {pv.name!r}: {pv.gpu.key} needs driver {need} or later (the first release that lists it); "
            f"EKS AL2023 AMI {k.ami_version} ships {driver}",
            where, key=on_key,
            hint=f"pin an AMI release that ships {need} or later (amiVersion)",
        )


def _precompiled(rf: ResolvedFleet, version: str, pools: list, where: tuple) -> Diagnostic:
    op = rf.fleet.spec.cluster.gpu_operator
    names = ", ".join(f"{pv.name!r} ({pv.pool.os or 'os not set'})" for pv in pools[:5])
    more = f" and {len(pools) - 5} more" if len(pools) > 5 else ""
    return rf.diag(
        E_PRECOMPILED_OS,
        f"driverVersion {version} selects precompiled driver images, which exist for {PRECOMPILED_OS} only; "
        f"static pool{'s' if len(pools) > 1 else ''} {names}{more} {'are' if len(pools) > 1 else 'is'} not said "
        "to run it",
        where,
        hint=f"use a full release such as {CHART_DEFAULT_DRIVER.get(op.chart_version, '595.91.07')} "
             f"(compiled on the node), or set os: {PRECOMPILED_OS} on pools whose nodes run Ubuntu 22.04",
    )
