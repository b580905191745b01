"""Monitoring: alert rules, a Grafana dashboard and a runbook for what the spec planned.

Emitted only when the spec has ``spec.monitoring`` (a spec without it compiles
to the same bytes as before). Made for a stock kube-prometheus-stack
(chart ``kube-prometheus-stack-88.5.3``, prometheus-community/helm-charts
``ea930baeebeba39f56d6b44e351f23b2a072a600``):

- its Prometheus selects ServiceMonitors and PrometheusRules labelled
  ``release: <Helm release>`` in every namespace
  (``templates/prometheus/prometheus.yaml`` lines 193-201 and 278-285,
  ``serviceMonitorSelectorNilUsesHelmValues``/``ruleSelectorNilUsesHelmValues``
  true in ``values.yaml``): ``monitoring.release`` is that label's value;
- its Grafana sidecar loads dashboards from ConfigMaps labelled
  ``grafana_dashboard: "1"`` in all namespaces (``values.yaml`` lines 1537-1542,
  ``searchNamespace: ALL``).

Scraping (:func:`service_monitor_values`, merged into the GPU Operator values):
the operator (NVIDIA/gpu-operator v26.7.0) builds the DCGM exporter's
ServiceMonitor from ``assets/state-dcgm-exporter/0500_service_monitor.yaml`` and
``applyServiceMonitorCustomEdits`` (``controllers/object_controls.go`` line
4974): ``additionalLabels`` onto its labels, ``interval`` and ``relabelings``
onto its one endpoint. gpuplan adds the ``release`` label and relabels
``__meta_kubernetes_pod_node_name`` into ``node``, the label every rule joins on.

Which node belongs to which pool comes from kube-state-metrics
(kubernetes/kube-state-metrics v2.20.0): ``kube_node_labels`` carries a node
label only when it is allow-listed (``--metric-labels-allowlist``), named
``label_`` + the key with every character outside ``[a-zA-Z0-9_]`` turned into
``_`` (``internal/store/utils.go`` lines 146-150): ``label_gpuplan_dev_pool``,
``label_nvidia_com_mig_config_state``, and for the dashboard's tenant rows
``kube_namespace_labels``' ``label_gpuplan_dev_tenant``.
``monitoring/kube-prometheus-stack-values.yaml`` is the values fragment that
allow-lists them. Extended resources in
``kube_node_status_capacity`` and ``kube_pod_container_resource_requests`` use
the same sanitised name (``resource="nvidia_com_mig_1g_10gb"``,
``internal/store/node.go`` lines 397-403); ``kube_resourcequota`` keeps the raw
key (``resource="requests.nvidia.com/gpu"``, ``internal/store/resourcequota.go``
lines 76-88).

DCGM metrics (dcgm-exporter ``etc/default-counters.csv`` at 4.5.3-4.8.2,
691c92762eb551313c825f6efe4ceeee20982801): the metrics used here are in the
default list, plus the windowed XID count ``DCGM_EXP_XID_ERRORS_COUNT``, which the
counters file gpuplan ships (``dcgm_exporter_values``) adds: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
(use; the one utilisation metric reported per MIG instance too),
``DCGM_FI_DEV_FB_USED``/``DCGM_FI_DEV_FB_FREE``, ``DCGM_EXP_XID_ERRORS_COUNT``,
``DCGM_FI_DEV_ROW_REMAP_FAILURE``, ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS``
(double-bit ECC errors on GPUs with row remapping; on older GPUs they show as
XID 48). The exporter labels a GPU in use with the pod's ``namespace`` and
``pod`` (``internal/pkg/transformation/const.go`` lines 21-22); the chart's
``honorLabels: false`` makes Prometheus keep its own target labels and rename
these to ``exported_namespace``/``exported_pod``, which the rules use. MIG
instances carry ``GPU_I_PROFILE``.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import OPERANDS_LABEL, POOL_LABEL, TENANT_LABEL
from gpuplan.identity import boot_mig, mig_config_name
from gpuplan.dra.claims import is_dra
from gpuplan.resolve import GPU, PoolView, ResolvedFleet, mig_resource
from gpuplan.spec.models import Monitoring, Tier

MONITORING_API = "monitoring.coreos.com/v1"
DIR = "monitoring"
RUNBOOK = f"{DIR}/RUNBOOK.md"
STACK_VALUES = f"{DIR}/kube-prometheus-stack-values.yaml"
DASHBOARD_PATH = f"{DIR}/dashboard.yaml"
DASHBOARD_VALUE = "1"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
HOURS_PER_DAY = 24

# GPU Operator v26.7.0 operand DaemonSets (assets/state-device-plugin/0500_daemonset.yaml,
# assets/state-dcgm-exporter/0800_daemonset.yaml)
DEVICE_PLUGIN_DS = "nvidia-device-plugin-daemonset"
DCGM_EXPORTER_DS = "nvidia-dcgm-exporter"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"

# --- what the DCGM exporter needs (issue #29) ---------------------------------------------
#
# XIDs. DCGM_FI_DEV_XID_ERRORS is "Value of the last XID error encountered"
# (NVIDIA/dcgm-exporter 691c92762eb551313c825f6efe4ceeee20982801, tag 4.5.3-4.8.2,
# etc/default-counters.csv line 29, etc/dcp-metrics-included.csv line 29): a gauge that
# keeps the last XID until the GPU is reset (NVIDIA/dcgm-exporter#500), so an alert on it
# never resolves, and it pages for XIDs that tenant programs cause (13, 31, 43, 45).
# DCGM_EXP_XID_ERRORS_COUNT counts the XIDs DCGM reported in the last window, one series per
# code with labels ``xid`` and ``window_size_in_ms`` (internal/pkg/collector/xid_collector.go
# lines 68-70, expcollector.go lines 47-105: a GPU with none in the window has one series
# without ``xid`` at 0; a code's series disappears once it leaves the window). The window is
# ``--xid-count-window-size`` / DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE, default 5 minutes
# (pkg/cmd/app.go lines 237-242). It is off unless the counters file lists it: commented out
# in etc/default-counters.csv line 40 and absent from etc/dcp-metrics-included.csv, the file
# the GPU Operator's exporter reads (NVIDIA/gpu-operator v26.7.0
# assets/state-dcgm-exporter/0800_daemonset.yaml lines 47-48) - hence dcgm_exporter_values.
#
# Hardware and driver XIDs only (NVIDIA's XID catalogue, docs.nvidia.com/deploy/xid-errors):
# 48 double-bit ECC, 61/62 internal micro-controller breakpoint/halt, 64 ECC page retirement
# or row remap recording failure, 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC
# rate, 94/95 contained/uncontained ECC, 119/120 GSP RPC timeout/error, 140 unrecovered ECC.
# Left out: 13, 31, 43, 45 (graphics engine exception, MMU fault, GPU stopped processing,
# preemptive cleanup: a tenant program's own fault or its being killed) and 63 (a row remap
# was recorded: GPUUncorrectableECCError covers it).
HARDWARE_XIDS = ("48", "61", "62", "64", "74", "79", "92", "94", "95", "119", "120", "140")
USER_XIDS = ("13", "31", "43", "45")
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
REGISTRATION_WINDOW = "1h"  # Karpenter's registration timeouts counted over the last hour
XID_WINDOW = "1h"  # an XID stays in the alert for an hour after the exporter's 5-minute window

# The counters file gpuplan gives the exporter: the file it reads by default
# (etc/dcp-metrics-included.csv at 691c927, its uncommented lines, unchanged) plus the XID
# count. The GPU Operator chart creates the ConfigMap from ``dcgmExporter.config.data``
# (deployments/gpu-operator/templates/dcgm_exporter_config.yaml at v26.7.0) and the operator
# mounts its ``dcgm-metrics.csv`` and points DCGM_EXPORTER_COLLECTORS at it
# (controllers/object_controls.go lines 1900-1920).
DCGM_METRICS_CONFIGMAP = "gpuplan-dcgm-metrics"
DCGM_METRICS_CSV = """\
# gpuplan: NVIDIA/dcgm-exporter etc/dcp-metrics-included.csv (691c927) + DCGM_EXP_XID_ERRORS_COUNT
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL, gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL, gauge, Decoder utilization (in %).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed
DCGM_FI_DRIVER_VERSION, label, Driver Version
DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_PCIE_TX_BYTES, gauge, The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
DCGM_FI_PROF_PCIE_RX_BYTES, gauge, The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window (see xid-count-window-size param).
"""

# Pod mapping. The exporter labels a GPU with its pod only when the kubelet's pod-resources
# API hands it out under nvidia.com/gpu, a nvidia.com/mig-* name, or a name listed in
# NVIDIA_RESOURCE_NAMES (--nvidia-resource-names, pkg/cmd/app.go lines 293-298;
# internal/pkg/transformation/kubernetes.go lines 68-85 and 772-780, at 691c927). Renamed
# shared resources (nvidia.com/gpu.shared) and any other renamed resource must be listed,
# or their GPUs carry no exported_namespace and the tier rules and tenant rows stay empty.
NVIDIA_RESOURCE = "nvidia.com/gpu"
NVIDIA_MIG_PREFIX = "nvidia.com/mig-"  # appconfig.NvidiaMigResourcePrefix

# GPU Operator operand switches: a node label nvidia.com/gpu.deploy.<operand>=false keeps
# that operand off the node, nvidia.com/gpu.deploy.operands=false keeps every operand off
# (NVIDIA/gpu-operator v26.7.0 controllers/state_manager.go lines 457-463, hasOperandsDisabled;
# a state label already set is honoured, addGPUStateLabels). OPERANDS_LABEL: from identity.
DEVICE_PLUGIN_OPERAND = "device-plugin"
DCGM_EXPORTER_OPERAND = "dcgm-exporter"


def ksm_name(name: str) -> str:
    """kube-state-metrics' sanitised form of a label key or resource name."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


POOL_KSM = "label_" + ksm_name(POOL_LABEL)
TENANT_KSM = "label_" + ksm_name(TENANT_LABEL)
MIG_STATE_KSM = "label_" + ksm_name(MIG_STATE_LABEL)


_PLAIN = re.compile(r"[A-Za-z0-9_.+/=:~ -]*\Z")


def q(value: str) -> str:
    """A PromQL string literal."""
    if _PLAIN.match(value):
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=True)


_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def alternation(values: Sequence[str]) -> str:
    """A PromQL (RE2, fully anchored) regex literal matching exactly these values."""
    return q("|".join(_REGEX_META.sub(r"\\\1", v) for v in values))


def monitoring(rf: ResolvedFleet) -> Monitoring | None:
    return rf.fleet.spec.monitoring


def namespace(rf: ResolvedFleet) -> str:
    m = monitoring(rf)
    assert m is not None
    return m.namespace or rf.fleet.spec.cluster.gpu_operator.namespace


def service_monitor_values(rf: ResolvedFleet) -> dict[str, Any]:
    """Extra keys for the GPU Operator's ``dcgmExporter.serviceMonitor`` values (empty without monitoring)."""
    m = monitoring(rf)
    if m is None:
        return {}
    return {
        "interval": m.scrape_interval,
        "additionalLabels": {"release": m.release},
        "relabelings": [{
            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
            "targetLabel": "node",
            "action": "replace",
        }],
    }


def exporter_resource_names(rf: ResolvedFleet) -> list[str]:
    """Resources the pools hand out through a device plugin that dcgm-exporter does not map
    to pods on its own (see NVIDIA_RESOURCE); sorted, no duplicates."""
    names = {res for pv in rf.pools if not is_dra(rf, pv) and operand_deployed(rf, pv, DCGM_EXPORTER_OPERAND)
             for res in pv.node_resources()
             if res != NVIDIA_RESOURCE and not res.startswith(NVIDIA_MIG_PREFIX)}
    return sorted(names)


def dcgm_exporter_values(rf: ResolvedFleet) -> dict[str, Any]:
    """Extra keys for the GPU Operator's ``dcgmExporter`` values (empty without monitoring):
    the counters file with the XID count, and NVIDIA_RESOURCE_NAMES for renamed resources
    (merged into ``dcgmExporter`` by gpuplan.lower.operator)."""
    m = monitoring(rf)
    if m is None:
        return {}
    out: dict[str, Any] = {"config": {"name": DCGM_METRICS_CONFIGMAP, "create": True, "data": DCGM_METRICS_CSV}}
    names = exporter_resource_names(rf)
    if names:
        # a comma-separated list: urfave/cli StringSliceFlag from an env var
        out["env"] = [{"name": "NVIDIA_RESOURCE_NAMES", "value": ",".join(names)}]
    return out


def pool_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """The labels gpuplan puts on the pool's nodes (Karpenter: the NodePool template's)."""
    from gpuplan.identity import template_node_labels

    return template_node_labels(rf, pv)


def operand_deployed(rf: ResolvedFleet, pv: PoolView, operand: str) -> bool:
    """Whether the GPU Operator runs ``operand`` on the pool's nodes (see OPERANDS_LABEL)."""
    labels = pool_labels(rf, pv)
    if labels.get(OPERANDS_LABEL) == "false":
        return False
    return labels.get(f"nvidia.com/gpu.deploy.{operand}") != "false"


def left_out(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """Alerts not generated for a pool, and why: what does not run there cannot be ready,
    and what is not scraped cannot fire."""
    from gpuplan.provisioning.pools import platform_gpu_stack, title

    out: dict[str, str] = {}
    operands_off = pool_labels(rf, pv).get(OPERANDS_LABEL) == "false"
    # whose GPU stack runs there instead: Bottlerocket's, or a platform's (GKE)
    owner = f"the {title(pv.pool)}'s own GPU stack" if platform_gpu_stack(pv.pool) else "Bottlerocket"
    if pv.pool.sharing.mode == "mig" and platform_gpu_stack(pv.pool):
        out["MIGConfigFailed"] = (f"the {title(pv.pool)} partitions the GPUs itself: no mig-manager runs "
                                  "there, so nothing ever sets `nvidia.com/mig.config.state`")
    if boot_mig(pv):
        out["MIGConfigFailed"] = ("the nodes' userData applies the MIG layout at boot and no mig-manager runs: "
                                  "the NodePool sets `nvidia.com/mig.config.state=success`, and a node whose "
                                  "layout fails powers off before it registers (see GPUNodeRegistrationTimeout)")
    if is_dra(rf, pv):
        out["GPUNodeCapacityOffPlan"] = ("DRA pool: its devices are ResourceSlices, never in "
                                         "Node.status.capacity (use `gpuplan verify-cluster` and "
                                         "`kubectl get resourceslices`)")
    if not operand_deployed(rf, pv, DEVICE_PLUGIN_OPERAND):
        out["GPUDevicePluginNotReady"] = (
            f"the GPU Operator's operands are off on this pool ({owner} runs its own device plugin)"
            if operands_off else
            "DRA pool: gpuplan turns the operator's device plugin off (the DRA kubelet plugin serves it)")
    if not operand_deployed(rf, pv, DCGM_EXPORTER_OPERAND):
        why = (f"the GPU Operator's operands are off on this pool ({owner}): no DCGM exporter runs, "
               "so there are no GPU health metrics there" if operands_off else
               "the DCGM exporter is off on this pool: no GPU health metrics there")
        for alert in ("DCGMExporterNotReady", "GPUMemoryNearlyFull", "GPUXidError", "GPURowRemapFailure",
                      "GPUUncorrectableECCError", "GPUTierUnderused"):
            out[alert] = why
    return out


# --- the alerts --------------------------------------------------------------


@dataclass(frozen=True)
class AlertDoc:
    name: str
    severity: str
    summary: str
    meaning: str
    steps: tuple[str, ...]

    @property
    def anchor(self) -> str:
        return self.name.lower()


ALERTS: dict[str, AlertDoc] = {a.name: a for a in (
    AlertDoc(
        "GPUTierUnderused", "warning",
        "A namespace holds GPUs of a tier and hardly uses them",
        "The GPUs (or MIG instances, or shared slots) allocated to pods of this namespace on the tier's "
        "pool were busy less than the threshold on average (DCGM_FI_PROF_GR_ENGINE_ACTIVE) for the whole "
        "window. The quota is taken and paid for at the pool's price, and other tenants cannot have it.",
        ("Find the pods: `kubectl -n <namespace> get pods -o wide` on the pool's nodes.",
         "Ask the tenant whether the workload is waiting on data, stuck, or an idle notebook.",
         "Scale it down or move it to a cheaper tier (MIG slice or time-sliced notebooks); "
         "lower the tenant's quota in fleet.yaml if the grant is larger than the need."),
    ),
    AlertDoc(
        "GPUMemoryNearlyFull", "warning",
        "A GPU's (or MIG instance's) framebuffer is nearly full",
        "DCGM_FI_DEV_FB_USED / (FB_USED + FB_FREE) stayed above the threshold. The next allocation in "
        "that process fails with CUDA out-of-memory; on time-sliced GPUs every sharer's memory counts.",
        ("See which pod holds it: the alert's `exported_pod` / `exported_namespace` labels.",
         "For time-sliced pools, fewer replicas or MPS with memory limits isolate tenants.",
         "For MIG tiers, a larger profile gives the workload more memory."),
    ),
    AlertDoc(
        "GPUXidError", "critical",
        "The driver reported an XID error on a GPU",
        "DCGM_EXP_XID_ERRORS_COUNT (the DCGM exporter's count of XIDs in its last 5-minute window, "
        "per code) saw a hardware or driver XID in the last hour: 48 double-bit ECC, 61/62 internal "
        "micro-controller, 64 row-remap recording failure, 74 NVLink, 79 GPU fell off the bus, 92 high "
        "single-bit ECC rate, 94/95 contained/uncontained memory error, 119/120 GSP, 140 unrecovered ECC. "
        "The alert resolves an hour after the last such XID. XIDs 13/31/43/45 come from tenant "
        "programs (their own faults) and do not fire it; the `DCGM_FI_DEV_XID_ERRORS` gauge keeps "
        "the last XID of a GPU until it is reset and is not alerted on.",
        ("Look the code up in NVIDIA's XID catalogue; `kubectl debug node/<node>` and `dmesg | grep -i xid`.",
         "For 48, 79, 94, 95: cordon and drain the node (`kubectl drain <node> --ignore-daemonsets`) and "
         "reset the GPU or reboot; open a hardware case if it returns."),
    ),
    AlertDoc(
        "GPURowRemapFailure", "critical",
        "A GPU ran out of spare memory rows",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE is set: an uncorrectable memory error could not be remapped. "
        "The GPU is unreliable until it is replaced.",
        ("Cordon and drain the node; the GPU needs an RMA.",
         "Take the node out of the pool in fleet.yaml (static pools) until it is repaired."),
    ),
    AlertDoc(
        "GPUUncorrectableECCError", "warning",
        "A GPU had an uncorrectable (double-bit) ECC error",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS grew: a row was remapped after an uncorrectable error. "
        "The remap takes effect at the next GPU reset; the job that hit it has most likely failed.",
        ("Drain the node and reset the GPU (or reboot) so that the remap takes effect.",
         "Watch for GPURowRemapFailure: when spare rows run out the GPU must be replaced."),
    ),
    AlertDoc(
        "MIGConfigFailed", "critical",
        "mig-manager failed to apply the pool's MIG layout on a node",
        "The node's `nvidia.com/mig.config.state` label is `failed`: the layout gpuplan planned for this "
        "pool (node label `nvidia.com/mig.config`) is not on the node, and its MIG resources are missing.",
        ("`kubectl -n <gpu-operator namespace> logs -l app=nvidia-mig-manager --tail=200` on that node.",
         "Usually GPUs still busy (pods or host processes holding them) or a reboot needed; drain the node, "
         "then relabel: `kubectl label node <node> nvidia.com/mig.config-` and let gpuplan's rule set it back.",
         "Run `gpuplan verify-cluster` to compare every node with the plan."),
    ),
    AlertDoc(
        "GPUNodeRegistrationTimeout", "warning",
        "Karpenter deleted a MIG-at-boot node that did not register in time",
        "On a Karpenter AL2023 MIG pool the userData partitions the GPUs before kubelet starts, rebooting "
        "once where a MIG mode change stays pending. A node whose layout fails powers off, and Karpenter "
        "deletes a NodeClaim whose node has not registered within its fixed 15 minutes "
        "(`karpenter_nodeclaims_disrupted_total{reason=\"registration_timeout\"}`) and launches a "
        "replacement that boots the same way: pods stay pending while Karpenter loops. Needs Prometheus to "
        "scrape Karpenter (its chart's `serviceMonitor.enabled: true` with the `release` label). No "
        "MIGConfigFailed alert on these pools: no mig-manager runs there and the NodePool presets "
        "`nvidia.com/mig.config.state=success`.",
        ("`kubectl get nodeclaims -l karpenter.sh/nodepool=<nodepool>` and `kubectl describe nodeclaim` "
         "for the launch and registration conditions; the NodePool's `NodeRegistrationHealthy` condition.",
         "The instance's console output (`aws ec2 get-console-output --instance-id <id>`) shows the "
         "`gpuplan-mig:` lines: a refused MIG mode, a mode still pending after the reboot, or a GPU "
         "instance that could not be created.",
         "If the layout was applied but boot and the reboot took longer than 15 minutes, use instance "
         "types that take the MIG mode without a reboot, or a static pool with mig-manager."),
    ),
    AlertDoc(
        "GPUNodeCapacityOffPlan", "warning",
        "A node advertises a different number of GPU resources than the plan",
        "kube_node_status_capacity for one of the pool's resources differs from what the spec says each "
        "node advertises (sharing mode, MIG layout and GPUs per node). Quotas and capacity reports assume "
        "the planned number. Not generated for DRA pools: DRA devices are published as ResourceSlices "
        "and never appear in Node.status.capacity; `gpuplan verify-cluster` and "
        "`kubectl get resourceslices` check those.",
        ("Compare with the plan: `gpuplan verify-cluster fleet.yaml --live nodes.json`.",
         "Missing MIG or shared resources: check the node's `nvidia.com/device-plugin.config` and "
         "`nvidia.com/mig.config` labels and the device plugin's logs.",
         "Fewer whole GPUs: a GPU may have fallen off the bus (see GPUXidError) or the node is a "
         "different instance type."),
    ),
    AlertDoc(
        "GPUQuotaNearlyExhausted", "info",
        "A namespace has used most of its quota for a tier",
        "kube_resourcequota used / hard for the tier's resource crossed the threshold. The next pod "
        "asking for the tier's resource in this namespace will be rejected at admission.",
        ("Tell the tenant; new pods will fail with `exceeded quota`.",
         "If the grant should grow, change the tenant's quota in fleet.yaml (`gpuplan plan` shows "
         "whether the pool has room)."),
    ),
    AlertDoc(
        "GPUDevicePluginNotReady", "critical",
        "No ready NVIDIA device plugin on a node of a GPU pool",
        "The pool's node has no ready `nvidia-device-plugin-daemonset` pod: its GPUs are not advertised "
        "and no GPU pod can start there. Not generated for DRA pools (gpuplan turns the operator's "
        "device plugin off there) or pools whose operands are off (Bottlerocket runs its own).",
        ("`kubectl -n <gpu-operator namespace> get pods -o wide | grep <node>`; check the pod's events.",
         "Taints the operator's DaemonSets do not tolerate keep it away; gpuplan adds every pool taint "
         "to `daemonsets.tolerations` in the operator values - check they were synced."),
    ),
    AlertDoc(
        "DCGMExporterNotReady", "warning",
        "No ready DCGM exporter on a node of a GPU pool",
        "The node's GPUs are not scraped: every other GPU alert is blind there. Not generated for "
        "pools where the exporter does not run (operands off: Bottlerocket).",
        ("`kubectl -n <gpu-operator namespace> get pods -o wide | grep dcgm-exporter`.",
         "The exporter waits for the driver and toolkit; look at the operator validator pods first."),
    ),
)}


def runbook_ref(rf: ResolvedFleet, alert: str) -> str:
    base = rf.fleet.spec.cluster.gitops.path.strip("/")
    return f"{base + '/' if base else ''}{RUNBOOK}#{ALERTS[alert].anchor}"


def _rule(rf: ResolvedFleet, alert: str, expr: str, for_: str, labels: dict[str, str],
          summary: str, description: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if for_ not in ("0m", "0s"):
        rule["for"] = for_
    return {
        **rule,
        "labels": {"severity": ALERTS[alert].severity, "fleet": rf.fleet.metadata.name, **labels},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook": runbook_ref(rf, alert),
        },
    }


def pool_nodes(pv: PoolView) -> str:
    return f"kube_node_labels{{{POOL_KSM}={q(pv.name)}}}"


def _ready_pods(rf: ResolvedFleet, daemonset: str) -> str:
    ns = q(rf.fleet.spec.cluster.gpu_operator.namespace)
    return (f"kube_pod_info{{namespace={ns}, created_by_kind=\"DaemonSet\", created_by_name={q(daemonset)}}}"
            f" and on(namespace, pod) (kube_pod_status_ready{{namespace={ns}, condition=\"true\"}} == 1)")


def tier_gpu_selector(rf: ResolvedFleet, tier: Tier) -> str:
    """DCGM series of the tier's devices (MIG instances by profile), allocated to a pod."""
    pv = rf.tier_pool(tier)
    assert pv is not None
    sel = ['exported_namespace!=""']
    s = pv.pool.sharing
    if s.mode == "mig" and s.strategy == "mixed":
        # a whole-GPU tier of a mixed MIG pool: the GPUs with MIG disabled
        sel.append(f"GPU_I_PROFILE={q(tier.profile or '')}")
    return ", ".join(sel)


def tier_grants(rf: ResolvedFleet) -> dict[str, list[tuple[str, str, int]]]:
    """Tier -> (tenant, namespace, units) granted it, units > 0, in spec order (one pass)."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    for t in rf.fleet.spec.tenants:
        for ns, grants in t.quotas.items():
            for tier, units in grants.items():
                if units > 0:
                    out.setdefault(tier, []).append((t.name, ns, units))
    return out


def unit_price(rf: ResolvedFleet, tier: Tier) -> float | None:
    """Price of one unit of the tier's resource per hour (None: no price in the spec)."""
    from gpuplan.units import unit_gpu_fraction

    pv = rf.tier_pool(tier)
    price = pv.pool.price_per_gpu_hour if pv is not None else None
    frac = unit_gpu_fraction(rf, tier)
    return None if price is None or frac is None else price * frac


def resource_unit_price(rf: ResolvedFleet, pv: PoolView, resource: str) -> float | None:
    """Price per hour of one unit of a resource the pool advertises (a MIG slice is priced by
    its share of the GPU's memory slices, a shared slot by 1/replicas), as for a tier."""
    profile = None
    s = pv.pool.sharing
    if s.mode == "mig" and resource != GPU:
        profile = next((p for lay in pv.gpu_layouts() if lay for p in lay
                        if mig_resource(p, s.strategy) == resource), None)
    return unit_price(rf, Tier.model_construct(name="-", pool=pv.name, profile=profile))


def _money(x: float) -> str:
    return f"${x:,.2f}"


def registration_timeout_rule(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    """NodeClaims of a boot-MIG pool that Karpenter deleted because their node did not register.

    Karpenter's liveness controller deletes a NodeClaim whose node has not registered within
    ``registrationTimeout = time.Minute * 15`` and counts it in
    ``karpenter_nodeclaims_disrupted_total{reason="registration_timeout", nodepool=<NodePool>}``
    (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go lines
    51-53 and 104, ``deleteNodeClaimForTimeout`` lines 148-159, the increment at 153-157; the metric:
    pkg/metrics/metrics.go lines 61-73, namespace ``karpenter`` and the ``reason``/``nodepool``
    labels in pkg/metrics/constants.go lines 27-30). The pool's provisioner then launches a
    replacement, which boots the same way: a layout that fails (the instance powers off) or a
    partition plus reboot that takes longer than 15 minutes loops. The series exist only where
    Prometheus scrapes Karpenter (the Karpenter chart's ``serviceMonitor.enabled``,
    aws/karpenter-provider-aws@v1.14.1 charts/karpenter/values.yaml lines 28-32)."""
    from gpuplan.lower.karpenter import nodepool_names

    m = monitoring(rf)
    assert m is not None
    sel = f"reason=\"registration_timeout\", nodepool=~{alternation(nodepool_names(pv))}"
    return _rule(
        rf, "GPUNodeRegistrationTimeout",
        f"sum by (nodepool) (increase(karpenter_nodeclaims_disrupted_total{{{sel}}}[{REGISTRATION_WINDOW}])) > 0",
        "0m", {"pool": pv.name},
        f"Karpenter deleted NodeClaims of NodePool {{{{ $labels.nodepool }}}} (pool {pv.name}) whose node "
        "did not register in 15 minutes",
        f"{{{{ $value | humanize }}}} NodeClaims of pool {pv.name} timed out before registering in the last "
        f"{REGISTRATION_WINDOW}: the MIG layout its userData applies at boot failed (the instance powers "
        "off) or the partition and its reboot took longer than Karpenter's 15 minutes; each replacement "
        "boots the same way.",
    )


def pool_rules(rf: ResolvedFleet, pv: PoolView) -> list[dict[str, Any]]:
    m = monitoring(rf)
    assert m is not None
    th = m.thresholds
    nodes = pool_nodes(pv)
    on_pool = f"and on(node) {nodes}"
    pool = {"pool": pv.name}
    skip = left_out(rf, pv)
    rules = []
    for res, count in ({} if "GPUNodeCapacityOffPlan" in skip else pv.node_resources()).items():
        r = q(ksm_name(res))
        rules.append(_rule(
            rf, "GPUNodeCapacityOffPlan",
            f"((max by (node) (kube_node_status_capacity{{resource={r}, unit=\"integer\"}})"
            f" or on(node) max by (node) (0 * {nodes})) != {count}) {on_pool}",
            th.not_ready_for, {**pool, "resource": res},
            f"Node {{{{ $labels.node }}}} advertises {{{{ $value }}}} {res}; pool {pv.name} plans {count}",
            f"Every node of pool {pv.name} should advertise {count} {res} (the spec's sharing and "
            f"GPUs per node); node {{{{ $labels.node }}}} has {{{{ $value }}}}.",
        ))
    if pv.pool.sharing.mode == "mig" and "MIGConfigFailed" not in skip:
        rules.append(_rule(
            rf, "MIGConfigFailed",
            f"kube_node_labels{{{POOL_KSM}={q(pv.name)}, {MIG_STATE_KSM}=\"failed\"}}",
            th.mig_failed_for, pool,
            f"MIG layout {mig_config_name(pv)} failed on node {{{{ $labels.node }}}} (pool {pv.name})",
            "mig-manager set nvidia.com/mig.config.state=failed on node {{ $labels.node }}; "
            "the pool's MIG resources are missing there.",
        ))
    if boot_mig(pv):
        rules.append(registration_timeout_rule(rf, pv))
    for alert, ds in (("GPUDevicePluginNotReady", DEVICE_PLUGIN_DS), ("DCGMExporterNotReady", DCGM_EXPORTER_DS)):
        if alert in skip:
            continue
        rules.append(_rule(
            rf, alert, f"{nodes} unless on(node) ({_ready_pods(rf, ds)})", th.not_ready_for, pool,
            f"No ready {ds} pod on node {{{{ $labels.node }}}} (pool {pv.name})",
            f"The {ds} DaemonSet has no ready pod on node {{{{ $labels.node }}}} of pool {pv.name}.",
        ))
    if "GPUMemoryNearlyFull" in skip:  # no DCGM exporter on the pool: no GPU metric at all
        return rules
    mem = th.memory_percent
    rules.append(_rule(
        rf, "GPUMemoryNearlyFull",
        f"(DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 100 {on_pool}) > {mem:g}",
        th.memory_for, pool,
        "GPU {{ $labels.gpu }} on {{ $labels.node }} has {{ $value | humanize }}% memory used",
        f"Framebuffer memory above {mem:g}% for {th.memory_for} on pool {pv.name} "
        f"(pod {{{{ $labels.exported_namespace }}}}/{{{{ $labels.exported_pod }}}}).",
    ))
    # hardware XIDs in the exporter's window, kept for XID_WINDOW (see HARDWARE_XIDS): the
    # alert resolves an hour after the last one, and a tenant's own XID never fires it
    rules.append(_rule(
        rf, "GPUXidError",
        f"(max_over_time({XID_COUNT}{{xid=~{alternation(HARDWARE_XIDS)}}}[{XID_WINDOW}]) {on_pool}) > 0",
        "0m", pool,
        "XID {{ $labels.xid }} on GPU {{ $labels.gpu }} of node {{ $labels.node }}",
        f"The NVIDIA driver reported hardware XID {{{{ $labels.xid }}}} ({{{{ $value }}}} in one "
        f"exporter window) on pool {pv.name} within the last {XID_WINDOW}.",
    ))
    rules.append(_rule(
        rf, "GPURowRemapFailure", f"(DCGM_FI_DEV_ROW_REMAP_FAILURE {on_pool}) > 0", "0m", pool,
        "GPU {{ $labels.gpu }} on node {{ $labels.node }} failed to remap a memory row",
        f"Row remapping failed on pool {pv.name}: the GPU needs replacing.",
    ))
    rules.append(_rule(
        rf, "GPUUncorrectableECCError",
        f"(increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h]) {on_pool}) > 0", "0m", pool,
        "GPU {{ $labels.gpu }} on node {{ $labels.node }} had an uncorrectable ECC error",
        f"Uncorrectable ECC error on pool {pv.name}; the row remap applies at the next GPU reset.",
    ))
    return rules


def quota_object(rf: ResolvedFleet, tier: Tier) -> str:
    from gpuplan.identity import QUOTA_NAME
    from gpuplan.units import class_scoped

    return f"gpuplan-tier-{tier.name}" if class_scoped(rf, tier) else QUOTA_NAME


def tier_rules(rf: ResolvedFleet, tier: Tier, grants: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """Under-use of the tier's devices, and quota use, in the namespaces granted the tier."""
    from gpuplan.identity import quota_key

    m = monitoring(rf)
    assert m is not None
    pv = rf.tier_pool(tier)
    res = rf.tier_resource(tier)
    if pv is None or res is None or not grants:
        return []
    th = m.thresholds
    nss = alternation([ns for _, ns, _ in grants])
    labels = {"pool": pv.name, "tier": tier.name}
    price = unit_price(rf, tier)
    cost = (f" Each allocated unit of {res} costs {_money(price)}/h ({_money(price * HOURS_PER_DAY)}/day)."
            if price is not None else "")
    sel = f"{tier_gpu_selector(rf, tier)}, exported_namespace=~{nss}"
    qsel = f"namespace=~{nss}, resourcequota={q(quota_object(rf, tier))}, resource={q(quota_key(res))}"
    underused = [] if "GPUTierUnderused" in left_out(rf, pv) else [
        _rule(
            rf, "GPUTierUnderused",
            f"avg by (exported_namespace) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel}}} and on(node) {pool_nodes(pv)})"
            f" * 100 < {th.underused_percent:g}",
            th.underused_for, labels,
            f"{{{{ $labels.exported_namespace }}}} uses its {tier.name} GPUs at {{{{ $value | humanize }}}}%",
            f"Pods of {{{{ $labels.exported_namespace }}}} hold {tier.name} devices on pool {pv.name} but kept "
            f"them under {th.underused_percent:g}% busy for {th.underused_for}.{cost}",
        )]
    return [
        *underused,
        _rule(
            rf, "GPUQuotaNearlyExhausted",
            f"kube_resourcequota{{{qsel}, type=\"used\"}} / ignoring(type) "
            f"kube_resourcequota{{{qsel}, type=\"hard\"}} * 100 >= {th.quota_percent:g}",
            th.quota_for, labels,
            f"{{{{ $labels.namespace }}}} has used {{{{ $value | humanize }}}}% of its {tier.name} quota",
            f"ResourceQuota {{{{ $labels.namespace }}}}/{quota_object(rf, tier)} holds the namespace's {res} for "
            f"tier {tier.name}; pods asking for more are rejected at admission.",
        ),
    ]


def prometheus_rule(rf: ResolvedFleet, name: str, groups: list[dict[str, Any]],
                    extra_labels: dict[str, str]) -> dict[str, Any]:
    from gpuplan.lower.common import object_annotations

    m = monitoring(rf)
    assert m is not None
    meta = metadata(rf, name, namespace=namespace(rf), extra_labels={"release": m.release, **extra_labels},
                    annotations=object_annotations(rf, "PrometheusRule"))
    return obj(MONITORING_API, "PrometheusRule", meta, spec={"groups": groups})


def rule_artifacts(rf: ResolvedFleet) -> list[Artifact]:
    grants = tier_grants(rf)
    by_pool: dict[str, list[Tier]] = {}
    for t in rf.fleet.spec.tiers:
        by_pool.setdefault(t.pool, []).append(t)
    out = []
    for pv in rf.pools:
        groups = [{"name": f"gpuplan.pool.{pv.name}", "rules": pool_rules(rf, pv)}]
        tiers = [r for t in by_pool.get(pv.name, ()) for r in tier_rules(rf, t, grants.get(t.name, []))]
        if tiers:
            groups.append({"name": f"gpuplan.tiers.{pv.name}", "rules": tiers})
        out.append(Artifact(
            path=f"{DIR}/rules/pool-{pv.name}.yaml",
            documents=(prometheus_rule(rf, f"gpuplan-pool-{pv.name}", groups, {POOL_LABEL: pv.name}),),
            description=f"PrometheusRule: pool {pv.name}'s nodes and GPUs; use and quota of its tiers",
        ))
    return out


# --- dashboard ---------------------------------------------------------------


def _panel(pid: int, title: str, targets: list[tuple[str, str]], unit: str, x: int, y: int,
           *, w: int = 6, h: int = 8) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": dict(DATASOURCE),
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": dict(DATASOURCE), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _variable(name: str, label: str, values: Sequence[str]) -> dict[str, Any]:
    """A custom multi-value variable, all values selected: a repeated row shows one row per value."""
    return {
        "name": name, "label": label, "type": "custom", "query": ",".join(values),
        "multi": True, "includeAll": True, "hide": 0,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
    }


def _price_table(rows: Sequence[tuple[dict[str, str], float]]) -> str:
    """A PromQL vector of constants, one series per label set: what the spec says things cost."""
    terms = []
    for labels, value in rows:
        expr = f"vector({value:g})"
        for k, v in labels.items():
            expr = f"label_replace({expr}, {q(k)}, {q(v)}, \"\", \"\")"
        terms.append(expr)
    return " or ".join(terms) if terms else "vector(0)"


RUNNING = "and on(namespace, pod) (kube_pod_status_phase{phase=\"Running\"} == 1)"
GPU_REQUESTS = f"(kube_pod_container_resource_requests{{resource=~\"nvidia_com_.*\"}} {RUNNING})"


def dashboard(rf: ResolvedFleet) -> dict[str, Any]:
    """One repeated row per pool and one per tenant (Grafana ``repeat`` over a custom variable),
    so the dashboard's size grows with the number of pools and tenants only through their
    names and the price table, never by a row of panels each: a 1,000-tenant fleet still
    fits a ConfigMap (1 MiB)."""
    pool_var = f"{POOL_KSM}=\"$pool\""
    tenant_ns = f"kube_namespace_labels{{{TENANT_KSM}=\"$tenant\"}}"
    pool_nodes_var = f"kube_node_labels{{{pool_var}}}"
    gpu_day = _price_table([({POOL_KSM: pv.name}, (pv.gpus_per_node or 0) * pv.pool.price_per_gpu_hour
                             * HOURS_PER_DAY)
                            for pv in rf.pools if pv.pool.price_per_gpu_hour is not None])
    unit_day = _price_table([({POOL_KSM: pv.name, "resource": ksm_name(res)}, price * HOURS_PER_DAY)
                             for pv in rf.pools for res in pv.node_resources()
                             for price in [resource_unit_price(rf, pv, res)] if price is not None])
    pool_panels = [
        ("Allocated / capacity", [
            (f"sum by (resource) (kube_node_status_capacity{{resource=~\"nvidia_com_.*\"}} "
             f"and on(node) {pool_nodes_var})", "{{resource}} capacity"),
            (f"sum by (resource) ({GPU_REQUESTS} and on(node) {pool_nodes_var})", "{{resource}} allocated"),
        ], "short"),
        ("GPU utilisation", [(f"avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE and on(node) {pool_nodes_var}) * 100",
                              "average")], "percent"),
        ("GPU memory used", [(f"sum(DCGM_FI_DEV_FB_USED and on(node) {pool_nodes_var}) / "
                              f"sum((DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) and on(node) {pool_nodes_var}) * 100",
                              "used")], "percent"),
        ("Cost per day at the spec's prices", [
            (f"sum(count by ({POOL_KSM}) ({pool_nodes_var}) * on({POOL_KSM}) group_left() ({gpu_day}))",
             "cost per day")], "currencyUSD"),
    ]
    tenant_panels = [
        ("Allocated / quota", [
            (f"sum by (namespace, resource) ({GPU_REQUESTS} and on(namespace) {tenant_ns})",
             "{{namespace}} {{resource}} allocated"),
            (f"sum by (namespace, resourcequota, resource) (kube_resourcequota{{resourcequota=~\"gpuplan-.*\", "
             f"type=\"hard\"}} > 0 and on(namespace) {tenant_ns})",
             "{{namespace}} {{resourcequota}} {{resource}} quota"),
        ], "short"),
        ("GPU utilisation", [(f"avg by (namespace) (label_replace(DCGM_FI_PROF_GR_ENGINE_ACTIVE"
                              f"{{exported_namespace!=\"\"}}, \"namespace\", \"$1\", \"exported_namespace\", \"(.*)\")"
                              f" and on(namespace) {tenant_ns}) * 100", "{{namespace}}")], "percent"),
        ("GPU memory used", [(f"sum by (namespace) (label_replace(DCGM_FI_DEV_FB_USED"
                              f"{{exported_namespace!=\"\"}}, \"namespace\", \"$1\", \"exported_namespace\", \"(.*)\")"
                              f" and on(namespace) {tenant_ns})", "{{namespace}}")], "decmbytes"),
        ("Cost per day at the spec's prices", [
            (f"sum(sum by ({POOL_KSM}, resource) (({GPU_REQUESTS} * on(node) group_left({POOL_KSM}) "
             f"kube_node_labels{{{POOL_KSM}!=\"\"}}) and on(namespace) {tenant_ns}) "
             f"* on({POOL_KSM}, resource) group_left() ({unit_day}))", "cost per day")], "currencyUSD"),
    ]
    panels: list[dict[str, Any]] = []
    y = 0
    for var, title, section in (("pool", "Pool $pool", pool_panels), ("tenant", "Tenant $tenant", tenant_panels)):
        panels.append({"id": len(panels) + 1, "type": "row", "title": title, "repeat": var, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        y += 1
        for col, (ptitle, targets, unit) in enumerate(section):
            panels.append(_panel(len(panels) + 1, ptitle, targets, unit, x=col * 6, y=y))
        y += 8
    return {
        "uid": f"gpuplan-{rf.fleet.metadata.name}"[:40],
        "title": f"GPU fleet {rf.fleet.metadata.name} (gpuplan)",
        "tags": ["gpuplan", "gpu"],
        "editable": False,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "timezone": "utc",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1},
            _variable("pool", "Pool", [pv.name for pv in rf.pools]),
            _variable("tenant", "Tenant", [t.name for t in rf.fleet.spec.tenants]),
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_configmap(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.lower.common import object_annotations

    m = monitoring(rf)
    assert m is not None
    name = f"gpuplan-{rf.fleet.metadata.name}-dashboard"
    meta = metadata(rf, name, namespace=namespace(rf), extra_labels={m.dashboard_label: DASHBOARD_VALUE},
                    annotations=object_annotations(rf, "ConfigMap"))
    body = json.dumps(dashboard(rf), indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    return obj("v1", "ConfigMap", meta, data={f"gpuplan-{rf.fleet.metadata.name}.json": body})


def stack_values(rf: ResolvedFleet) -> dict[str, Any]:
    """The kube-prometheus-stack values gpuplan's rules need (merge into the stack's own values)."""
    return {
        "kube-state-metrics": {
            "metricLabelsAllowlist": [f"namespaces=[{TENANT_LABEL}]", f"nodes=[{POOL_LABEL},{MIG_STATE_LABEL}]"],
        },
    }


# --- runbook -----------------------------------------------------------------


def runbook(rf: ResolvedFleet, rule_files: Sequence[Artifact]) -> str:
    from gpuplan.lower.common import cell

    m = monitoring(rf)
    assert m is not None
    th = m.thresholds
    where: dict[str, list[str]] = {}
    for a in rule_files:
        for doc in a.documents or ():
            for g in doc["spec"]["groups"]:
                for r in g["rules"]:
                    scope = ", ".join(f"{k}={v}" for k, v in r["labels"].items()
                                      if k in ("pool", "tier", "tenant", "resource"))
                    where.setdefault(r["alert"], []).append(f"`{cell(a.path)}`: {cell(scope)}")
    lines = [
        f"# Alert runbook: fleet {cell(rf.fleet.metadata.name)}",
        "",
        f"The PrometheusRules in `{DIR}/rules/` (label `release: {cell(m.release)}`) are generated from the "
        "spec, one per pool: the health of its nodes and GPUs, and for each tier on it, the use of its "
        "devices and of its quota in the namespaces granted it. Each alert's `runbook` annotation points "
        "at its section here.",
        "",
        "Prerequisites: kube-prometheus-stack with the kube-state-metrics allow-list in "
        f"`{STACK_VALUES}` (node labels `{POOL_LABEL}`, `{MIG_STATE_LABEL}`; namespace label "
        f"`{TENANT_LABEL}` for the dashboard), and the GPU Operator "
        "values from this tree (DCGM exporter ServiceMonitor with the `release` label and a `node` label).",
        "",
        "| threshold | value |",
        "|---|---|",
        f"| under-used below | {th.underused_percent:g}% for {th.underused_for} |",
        f"| GPU memory above | {th.memory_percent:g}% for {th.memory_for} |",
        f"| quota used at or above | {th.quota_percent:g}% for {th.quota_for} |",
        f"| device plugin / exporter missing, capacity off plan | {th.not_ready_for} |",
        f"| MIG config failed | {th.mig_failed_for} |",
        "",
    ]
    for a in ALERTS.values():
        lines += [
            f'<a id="{a.anchor}"></a>',
            f"## {a.name}",
            "",
            f"**{a.summary}** (severity `{a.severity}`)",
            "",
            a.meaning,
            "",
            "What to do:",
            "",
            *(f"{i}. {s}" for i, s in enumerate(a.steps, 1)),
            "",
        ]
        if where.get(a.name):
            lines += ["Generated for:", "", *(f"- {w}" for w in where[a.name]), ""]
        else:
            lines += ["Not generated for this fleet.", ""]
        skipped = [(pv.name, why) for pv in rf.pools for alert, why in left_out(rf, pv).items()
                   if alert == a.name]
        if skipped:
            lines += ["Left out:", "", *(f"- pool {cell(p)}: {cell(why)}" for p, why in skipped), ""]
    return "\n".join(lines)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if monitoring(rf) is None:
        return []
    rules = rule_artifacts(rf)
    return [
        *rules,
        Artifact(path=DASHBOARD_PATH, documents=(dashboard_configmap(rf),),
                 description="Grafana dashboard (ConfigMap for the Grafana sidecar): a row per pool and per tenant"),
        Artifact(path=STACK_VALUES, documents=(stack_values(rf),), kustomize=False,
                 description="kube-prometheus-stack values the alert rules need (kube-state-metrics node labels)"),
        Artifact(path=RUNBOOK, text=runbook(rf, rules), kustomize=False,
                 description="what each alert means and what to do"),
    ]
