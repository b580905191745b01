"""Static pools: the KubeletConfiguration drop-in under pools/<pool>/kubelet/.

kubernetes-validate ships no KubeletConfiguration schema (it is a component
config, not an API object), so the keys are checked against the upstream field
list (kubernetes/kubelet@v0.36.3 config/v1beta1/types.go, reference facts §f)
and their values against the enums there."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import compile_fleet

REPO = Path(__file__).resolve().parents[2]

# KubeletConfiguration fields gpuplan may write, with their value checks.
UPSTREAM_FIELDS = {
    "apiVersion": lambda v: v == "kubelet.config.k8s.io/v1beta1",
    "kind": lambda v: v == "KubeletConfiguration",
    "cpuManagerPolicy": lambda v: v in ("none", "static"),
    "reservedSystemCPUs": lambda v: isinstance(v, str) and v != "",
    "kubeReserved": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "systemReserved": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "topologyManagerPolicy": lambda v: v in ("none", "best-effort", "restricted", "single-numa-node"),
    "topologyManagerScope": lambda v: v in ("container", "pod"),
    "topologyManagerPolicyOptions": lambda v: isinstance(v, dict)
    and set(v) <= {"prefer-closest-numa-nodes", "max-allowable-numa-nodes"}
    and all(isinstance(x, str) for x in v.values()),
    "memoryManagerPolicy": lambda v: v in ("None", "Static"),
}


def spec(tmp_path: Path, topology: str) -> Path:
    p = tmp_path / "fleet.yaml"
    p.write_text(
        "apiVersion: gpuplan.dev/v1alpha1\nkind: Fleet\nmetadata: {name: t}\nspec:\n  cluster:\n"
        '    kubernetesVersion: "1.33"\n    gitops: {repoURL: "https://git.example.com/t.git"}\n'
        "  pools:\n    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n"
        f"      nodes: [gpu-01, gpu-02]\n{topology}"
    )
    return p


DROPIN = "pools/train/kubelet/50-gpuplan-topology.conf"


def load(files: dict[str, bytes]) -> dict:
    docs = [d for d in yaml.safe_load_all(files[DROPIN]) if d is not None]
    assert len(docs) == 1
    doc = docs[0]
    for k, v in doc.items():
        assert k in UPSTREAM_FIELDS, f"{k} is not a KubeletConfiguration field gpuplan may set"
        assert UPSTREAM_FIELDS[k](v), f"{k}: {v!r}"
    return doc


def test_dropin_carries_the_topology(tmp_path: Path) -> None:
    files = compile_fleet(spec(tmp_path, "      topology: {policy: single-numa-node, scope: pod, "
                                         'reservedSystemCPUs: "0,1", preferClosestNUMANodes: true}\n')).files
    doc = load(files)
    assert doc == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0,1",
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
        "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
    }
    # static CPU manager always comes with a CPU reservation here
    assert doc["cpuManagerPolicy"] != "static" or doc.get("reservedSystemCPUs") or doc.get("kubeReserved")
    # a node file, not a Kubernetes object: not in the kustomization
    kust = yaml.safe_load(files["kustomization.yaml"])
    assert not any("kubelet" in r for r in kust.get("resources", []))
    readme = files["pools/train/kubelet/README.md"].decode()
    for needle in ("/etc/kubernetes/kubelet.conf.d/", "--config-dir", "cpu_manager_state", "1.35", "1.31",
                   "*.conf", "`gpu-01`"):
        assert needle in readme, needle


def test_memory_manager_and_cpu_none(tmp_path: Path) -> None:
    files = compile_fleet(spec(tmp_path, "      topology: {policy: best-effort, cpuManagerPolicy: none, "
                                         "memoryManagerPolicy: Static}\n")).files
    doc = load(files)
    assert doc["cpuManagerPolicy"] == "none"
    assert doc["memoryManagerPolicy"] == "Static"
    assert doc["topologyManagerPolicy"] == "best-effort" and doc["topologyManagerScope"] == "container"
    assert "memory_manager_state" in files["pools/train/kubelet/README.md"].decode()


def test_no_dropin_for_default_topology(tmp_path: Path) -> None:
    files = compile_fleet(spec(tmp_path, "")).files
    assert files and not any("/kubelet/" in f for f in files)


def test_karpenter_pools_get_no_dropin() -> None:
    files = compile_fleet(REPO / "examples" / "aws-burst.yaml").files
    assert not any("/kubelet/" in f for f in files)
    files = compile_fleet(REPO / "examples" / "fleet.yaml").files
    assert DROPIN.replace("train", "train-a100") in files
    assert "pools/burst-h100/kubelet/50-gpuplan-topology.conf" not in files
