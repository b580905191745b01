"""GP660-GP662: `spec.monitoring` against what feeds it.

The alert rules and the dashboard read DCGM exporter metrics scraped through the
GPU Operator's ServiceMonitor, and price things at the pools' ``pricePerGPUHour``.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

E_NO_DCGM_SCRAPE = Code(
    "GP660", "monitoring without DCGM scraping", Severity.ERROR,
    "The GPU alerts (use, memory, XID, ECC) and the dashboard's utilisation and memory panels read "
    "DCGM exporter metrics, which reach Prometheus only through the ServiceMonitor the GPU Operator "
    "creates: with the exporter or its ServiceMonitor off they can never fire.",
    bad="gpuOperator:\n  dcgmExporter: {serviceMonitor: false}\nmonitoring: {release: kube-prometheus-stack}",
    good="gpuOperator:\n  dcgmExporter: {serviceMonitor: true}\nmonitoring: {release: kube-prometheus-stack}",
)
I_NO_PRICE = Code(
    "GP661", "monitored pool without a price", Severity.INFO,
    "With `monitoring`, a pool's `pricePerGPUHour` prices its under-used GPUs in alerts and its cost "
    "in the dashboard; a pool without one is left out of both.",
    bad="pools:\n  - {name: train, gpu: A100-SXM4-80GB, gpusPerNode: 4, nodes: [n1]}",
    good="pools:\n  - {name: train, gpu: A100-SXM4-80GB, gpusPerNode: 4, nodes: [n1], pricePerGPUHour: 1.60}",
)
CODES = (E_NO_DCGM_SCRAPE, I_NO_PRICE)


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    m = rf.fleet.spec.monitoring
    if m is None:
        return
    dcgm = rf.fleet.spec.cluster.gpu_operator.dcgm_exporter
    if not (dcgm.enabled and dcgm.service_monitor):
        off = "enabled" if not dcgm.enabled else "serviceMonitor"
        yield rf.diag(E_NO_DCGM_SCRAPE, f"monitoring is on but gpuOperator.dcgmExporter.{off} is false: "
                      "no DCGM metric reaches Prometheus", ("spec", "monitoring"), key=True,
                      hint=f"set gpuOperator.dcgmExporter.{off}: true")
    for pv in rf.pools:
        if pv.pool.price_per_gpu_hour is None:
            yield rf.diag(I_NO_PRICE, f"pool {pv.name} has no pricePerGPUHour: its cost is not in the "
                          "alerts or the dashboard", pv.path, key=True)
