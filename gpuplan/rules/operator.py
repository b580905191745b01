"""GP640-GP649: GPU Operator choices that hold for the whole fleet — container
toolkit and CDI, the managed driver's version, what runs on Bottlerocket nodes.

Why these are fleet-wide: the operator renders one ClusterPolicy, and what one
operand is told about another (the device plugin's CDI hook path, the driver
root) is the same on every node (docs/output-reference.md, "GPU Operator").

Stage: check (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Iterator

from gpuplan.codes import Code
from gpuplan.identity import CHART_DEFAULT_DRIVER
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
    "precompiled driver images `<branch>-<kernel>`), or a full driver version such as `535.104.05` "
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
    "device plugin through `settings.kubelet-device-plugins.nvidia`. That plugin does whole GPUs and "
    "time-slicing only: no mig-manager runs on these nodes, and MPS has no setting.",
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

CODES = (E_TOOLKIT_MIX, E_DRIVER_VERSION, W_DRIVER_FLOATS, E_BOTTLEROCKET_SHARING,
         E_BOTTLEROCKET_VERSION)

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
    al2023 = [pv for pv in rf.pools if pv.pool.karpenter is not None and pv.pool.karpenter.ami_family == "AL2023"]
    if al2023 and rf.toolkit != "preinstalled":
        pv = al2023[0]
        where, on_key = _at(rf, opath, "toolkit")
        if op.toolkit == "managed":
            msg = (f"pool {pv.name!r} runs the EKS AL2023 NVIDIA AMI, which ships its own container toolkit, but "
                   "gpuOperator.toolkit is managed: the device plugin's CDI hook would point at the operator's "
                   "toolkit, which these nodes do not have")
        else:
            msg = (f"pool {pv.name!r} runs the EKS AL2023 NVIDIA AMI, which ships its own container toolkit, and "
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
