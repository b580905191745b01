"""Static pools on the EKS AL2023 AMI get nodeadm steps, not kubeadm's drop-in directory:
nodeadm passes --config-dir=/etc/kubernetes/kubelet/config.json.d only when the NodeConfig
has spec.kubelet.config and writes that directory itself (awslabs/amazon-eks-ami@81fec2e8
nodeadm/internal/kubelet/config.go:31-35,351-359)."""

from __future__ import annotations

import yaml

from gpuplan.compiler import compile_fleet
from tests.rules.helpers import BASE, edit

TOPOLOGY = '      topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}\n'


def _readme(tmp_path, os_line: str) -> str:
    text = edit(BASE, "      nodes: [n1, n2]\n      sharing: {mode: exclusive}\n",
                "      nodes: [n1, n2]\n" + os_line + "      sharing: {mode: exclusive}\n" + TOPOLOGY)
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = compile_fleet(p, out_dir=tmp_path / "out")
    return c.files["pools/train/kubelet/README.md"].decode()


def test_al2023_static_pool_gets_the_nodeconfig(tmp_path):
    text = _readme(tmp_path, "      os: amzn2023\n")
    assert "--config-dir=/etc/kubernetes/kubelet.conf.d" not in text
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    nc = yaml.safe_load(block)
    assert nc["kind"] == "NodeConfig" and nc["spec"]["kubelet"]["config"] == {
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,1",
        "topologyManagerPolicy": "restricted", "topologyManagerScope": "pod"}
    assert "## Why" in text


def test_other_static_pools_keep_the_kubeadm_drop_in(tmp_path):
    text = _readme(tmp_path, "")
    assert "--config-dir=/etc/kubernetes/kubelet.conf.d" in text and "NodeConfig" not in text
