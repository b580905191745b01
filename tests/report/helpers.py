"""The common platform scenario, and helpers to check specs from text."""

from __future__ import annotations

from pathlib import Path

# 8 nodes × 4 A100-SXM4-80GB = 32 GPUs. Demand: 4 training jobs × 4 GPUs, 12 inference
# services, 8 notebooks. Whole GPUs for everything would need 16 + 12 + 8 = 36 GPUs.
# With the right sharing it fits in 32:
#   train: 4 nodes × 4 GPUs, exclusive           -> 16 nvidia.com/gpu      (4 jobs × 4 GPUs)
#   infer: 2 nodes × 4 GPUs, MIG {3g.40gb: 2}    -> 16 nvidia.com/mig-3g.40gb (12 services)
#   dev:   2 nodes × 4 GPUs, time-slicing ×2     -> 16 nvidia.com/gpu.shared  (8 notebooks)
SCENARIO = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: platform}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops:
      repoURL: https://git.example.com/fleet.git
  pools:
    - name: train
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [gpu-01, gpu-02, gpu-03, gpu-04]
      sharing: {mode: exclusive}
      pricePerGPUHour: 1.60
    - name: infer
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [gpu-05, gpu-06]
      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}
      pricePerGPUHour: 1.60
    - name: dev
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [gpu-07, gpu-08]
      sharing: {mode: time-slicing, replicas: 2}
      pricePerGPUHour: 1.60
  tiers:
    - {name: training, pool: train, workload: training, priority: 100000}
    - {name: inference, pool: infer, profile: 3g.40gb, workload: inference, priority: 300000}
    - {name: notebooks, pool: dev, workload: interactive, priority: 1000, preemption: Never}
  tenants:
    - name: vision
      namespaces: [vision-train, vision-serve]
      quotas:
        vision-train: {training: 8}
        vision-serve: {inference: 8}
    - name: nlp
      namespaces: [nlp-train, nlp-serve, nlp-notebooks]
      quotas:
        nlp-train: {training: 8}
        nlp-serve: {inference: 4}
        nlp-notebooks: {notebooks: 8}
"""


def write(tmp_path: Path, text: str, name: str = "fleet.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def resolved(tmp_path: Path, text: str, name: str = "fleet.yaml"):
    from gpuplan.compiler import check_fleet

    checked = check_fleet(write(tmp_path, text, name))
    assert checked.resolved is not None and not checked.failed(), checked.diagnostics
    return checked.resolved
