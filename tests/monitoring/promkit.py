"""Helpers for the monitoring tests: the real promtool, and series shaped like the exporters'.

Series carry the labels the real exporters give them once scraped through
kube-prometheus-stack (see gpuplan/lower/monitoring.py for the upstream
sources): kube-state-metrics series keep their own labels (its ServiceMonitor
honours labels), DCGM series get the ServiceMonitor's target labels
(``namespace``/``pod`` of the exporter pod, ``node`` from gpuplan's
relabeling) and the exporter's pod attribution as ``exported_namespace`` /
``exported_pod``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

KSM = {"job": "kube-state-metrics"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: it comes with Debian's `prometheus` package "
                    "(apt-get install prometheus); .ci/run installs it")
    return path


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ", ".join(f"{k}={_q(v)}" for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def _q(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_labels(node: str, pool: str, **extra: str) -> dict[str, str]:
    return {**KSM, "node": node, "label_gpuplan_dev_pool": pool, **extra}


def dcgm_labels(node: str, gpu: str = "0", *, ns: str | None = None, pod: str | None = None,
                profile: str | None = None) -> dict[str, str]:
    out = {"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "pod": f"nvidia-dcgm-exporter-{node}",
           "node": node, "gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}",
           "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": node}
    if profile is not None:
        out.update({"GPU_I_PROFILE": profile, "GPU_I_ID": "1"})
    if ns is not None:
        out.update({"exported_namespace": ns, "exported_pod": pod or f"{ns}-worker-0", "exported_container": "main"})
    return out


def humanize(v: float) -> str:
    """Prometheus' ``humanize`` for the values these tests use (1 <= v < 1000, or 0)."""
    if v == 0:
        return "0"
    assert 1 <= abs(v) < 1000, v
    return f"{v:.4g}"


def fmt_value(v: float) -> str:
    return f"{v:g}"


def render_annotation(template: str, labels: dict[str, str], value: float) -> str:
    """Render the template subset gpuplan's rules use: $labels.x, $value, $value | humanize."""
    out = re.sub(r"\{\{ \$value \| humanize \}\}", lambda m: humanize(value), template)
    out = re.sub(r"\{\{ \$value \}\}", lambda m: fmt_value(value), out)
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), out)
    assert "{{" not in out, f"unrendered template: {out}"
    return out


def expected_alert(rule: dict[str, Any], series_labels: dict[str, str], value: float) -> dict[str, Any]:
    labels = {**series_labels, **rule["labels"]}
    return {
        "exp_labels": labels,
        "exp_annotations": {k: render_annotation(v, labels, value) for k, v in rule["annotations"].items()},
    }


def write_rule_file(path: Path, prometheus_rule: dict[str, Any]) -> Path:
    """A PrometheusRule's spec is a Prometheus rule file (what the operator mounts)."""
    path.write_text(yaml.safe_dump({"groups": prometheus_rule["spec"]["groups"]}, sort_keys=False),
                    encoding="utf-8")
    return path
