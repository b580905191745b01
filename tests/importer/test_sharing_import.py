"""`gpuplan import` of GPU sharing configured outside the GPU Operator's ConfigMaps.

Fixtures follow the upstream formats:

* Bottlerocket's NVIDIA device-plugin settings, ``[settings.kubelet-device-plugins.nvidia]``
  ``device-sharing-strategy`` and its ``time-slicing`` table (bottlerocket-os/bottlerocket
  sources/settings-migrations/v1.25.0/kubelet-device-plugins-time-slicing-settings/src/main.rs:8-11;
  the plugin config they render, bottlerocket-os/bottlerocket-core-kit
  packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf:14-22);
* Karpenter's NodeOverlay ``karpenter.sh/v1alpha1`` (kubernetes-sigs/karpenter@v1.14.1
  pkg/apis/v1alpha1/nodeoverlay.go:64-99: requirements on any label, ``capacity``, ``price``,
  ``weight``), merged by weight (pkg/apis/v1alpha1/nodeoverlay.go:126-140,
  pkg/controllers/nodeoverlay/store.go:176-209);
* NodePool ``spec.limits`` counted against the nodes' advertised capacity
  (pkg/apis/v1/nodepool.go:190-200 ``ExceededBy``, pkg/controllers/state/statenode.go:359-374).
"""

from __future__ import annotations

from tests.importer.test_foreign import NODECLASS, _codes, _nodepool, _pool, _run

K = "karpenter.k8s.aws/"
P5 = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]  # 8 H100
G6E = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6e.12xlarge"]}]  # 4 L40S


def _bottlerocket(name, userdata, alias=True):
    nc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
          "spec": {**NODECLASS["spec"], "userData": userdata}}
    if alias:
        nc["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@v1.40.0"}]
    else:  # the AMI family named beside AMIs selected by id (EC2NodeClass spec.amiFamily)
        nc["spec"]["amiFamily"] = "Bottlerocket"
        nc["spec"]["amiSelectorTerms"] = [{"id": "ami-0123456789abcdef0"}]
    return nc


def _on(np_, nodeclass=None, labels=None, limits=None):
    if nodeclass:
        np_["spec"]["template"]["spec"]["nodeClassRef"]["name"] = nodeclass
    if labels:
        np_["spec"]["template"]["metadata"] = {"labels": labels}
    if limits:
        np_["spec"]["limits"] = limits
    return np_


def _overlay(name, requirements, capacity=None, weight=None, price=None):
    spec = {"requirements": requirements}
    if capacity is not None:
        spec["capacity"] = capacity
    if weight is not None:
        spec["weight"] = weight
    if price is not None:
        spec["price"] = price
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": spec}


def _dp_configmap(**configs):
    data = {}
    for name, (replicas, rename) in configs.items():
        data[name] = ("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                      f"    renameByDefault: {'true' if rename else 'false'}\n    resources:\n"
                      f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-slicing-config",
                                                                  "namespace": "gpu-operator"}, "data": data}


TIME_SLICED = """\
[settings.kubernetes]
cpu-manager-policy = "static"

[settings.kubelet-device-plugins.nvidia]
device-sharing-strategy = "time-slicing"

[settings.kubelet-device-plugins.nvidia.time-slicing]
replicas = 4
rename-by-default = true
fail-requests-greater-than-one = true
"""


def test_bottlerocket_time_slicing_in_userdata_is_the_pools_sharing():
    np_ = _on(_nodepool("br-l40s", G6E, limit="2"), nodeclass="br")
    # the same settings by amiFamily (AMIs by id), replicas left at the plugin's default (2), renaming off
    by_family = _on(_nodepool("br2-l40s", G6E), nodeclass="br2")
    other = ('[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = "time-slicing"\n\n'
             '[settings.kubelet-device-plugins.nvidia.time-slicing]\nrename-by-default = false\n')
    # a strategy gpuplan cannot write, and a userData that is no TOML
    mps = _on(_nodepool("br3-l40s", G6E), nodeclass="br3")
    broken = _on(_nodepool("br4-l40s", G6E), nodeclass="br4")
    r, spec = _run([np_, _bottlerocket("br", TIME_SLICED), by_family, _bottlerocket("br2", other, alias=False),
                    mps, _bottlerocket("br3", '[settings.kubelet-device-plugins.nvidia]\n'
                                              'device-sharing-strategy = "mps"\n'),
                    broken, _bottlerocket("br4", "[settings.kubelet-device-plugins.nvidia\nreplicas = 4\n")])
    pool = _pool(spec, "br-l40s")
    assert pool["sharing"] == {"mode": "time-slicing", "replicas": 4, "renameByDefault": True,
                               "failRequestsGreaterThanOne": True}
    assert pool["karpenter"]["amiFamily"] == "Bottlerocket" and pool["karpenter"]["amiVersion"] == "v1.40.0"
    assert pool["karpenter"]["maxGPUs"] == 8  # 2 nodes x 4 GPUs: limits.nodes counts nodes, not replicas
    assert pool["topology"] == {"cpuManagerPolicy": "static"}  # the same TOML's kubelet settings
    two = _pool(spec, "br2-l40s")
    assert two["karpenter"]["amiFamily"] == "Bottlerocket"
    assert two["sharing"] == {"mode": "time-slicing", "replicas": 2, "renameByDefault": False,
                              "failRequestsGreaterThanOne": True}
    assert _pool(spec, "br3-l40s")["sharing"] == {"mode": "exclusive"}
    findings = [d for d in r.diagnostics if d.code == "GP941"]
    assert {d.message.split(":")[0] for d in findings} == {"pool br3-l40s", "pool br4-l40s"}
    assert all(d.line for d in findings)
    rt = r.round_trip
    assert rt.built
    # gpuplan writes the same Bottlerocket settings (the plugin's defaults spelled out): the only userData
    # difference is its text, which the EC2NodeClass hash covers, named as such
    ud = {u.split(" ")[1].rstrip(":"): u for u in rt.unexplained if "spec.userData" in u}
    assert "same Bottlerocket settings" in ud["br-l40s"] and "same Bottlerocket settings" in ud["br2-l40s"], ud
    # the strategy gpuplan could not take is a difference: gpuplan's build runs whole GPUs there
    assert ud["br3-l40s"].endswith("spec.userData removed")


def test_nodeoverlays_by_instance_requirements_give_the_pools_sharing():
    gpu_name = [{"key": K + "instance-gpu-name", "operator": "In", "values": ["h100"]}]
    agree = _on(_nodepool("h100-ts", P5), labels={"nvidia.com/device-plugin.config": "ts-4"})
    bare = _nodepool("h100-bare", P5)  # no device-plugin config: the overlay alone says
    disagree = _on(_nodepool("l40s-ts", G6E), labels={"nvidia.com/device-plugin.config": "ts-4"})
    odd = _nodepool("l40s-odd", [{"key": K + "instance-size", "operator": "In", "values": ["24xlarge"]},
                                 {"key": K + "instance-family", "operator": "In", "values": ["g6e"]}])
    items = [agree, bare, disagree, odd, NODECLASS, _dp_configmap(**{"ts-4": (4, False)}),
             # the higher weight wins a resource two overlays set (store.go:199-204)
             _overlay("h100-slices", gpu_name, {"nvidia.com/gpu": "32"}, weight=10),
             _overlay("h100-old", gpu_name, {"nvidia.com/gpu": "16"}),
             _overlay("l40s-slices", G6E, {"nvidia.com/gpu": "8"}),  # 2 per GPU; the config says 4
             _overlay("l40s-odd", [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["l40s-odd"]}],
                      {"nvidia.com/gpu": "6"}),  # not a whole multiple of 4 GPUs
             _overlay("p5-price", [{"key": K + "instance-family", "operator": "In", "values": ["p5"]}],
                      price="55.04")]
    r, spec = _run(items)
    ts = _pool(spec, "h100-ts")
    assert ts["sharing"] == {"mode": "time-slicing", "replicas": 4, "renameByDefault": False,
                             "failRequestsGreaterThanOne": False}
    assert ts["karpenter"].get("nodeOverlay") is True
    bare_pool = _pool(spec, "h100-bare")
    assert bare_pool["sharing"]["mode"] == "time-slicing" and bare_pool["sharing"]["replicas"] == 4
    assert bare_pool["sharing"]["renameByDefault"] is False  # the overlay names nvidia.com/gpu itself
    findings = [d for d in r.diagnostics if d.code == "GP941"]
    assert {d.message.split(":")[0] for d in findings} == {"pool l40s-ts", "pool l40s-odd"}, findings
    assert all(d.line for d in findings)
    assert _pool(spec, "l40s-ts")["sharing"]["replicas"] == 4  # the device plugin's config, not the overlay
    assert _pool(spec, "l40s-odd")["sharing"] == {"mode": "exclusive"}
    rt = r.round_trip
    assert rt.built
    # a price-only overlay is not sharing; gpuplan does not write it, and the round trip says so
    assert "NodeOverlay.karpenter.sh p5-price: removed (gpuplan does not write it)" in rt.unexplained


def test_gpu_limit_counts_time_sliced_replicas():
    np_ = _on(_nodepool("h100-ts", P5), labels={"nvidia.com/device-plugin.config": "ts-4"},
              limits={"nvidia.com/gpu": "32"})
    np_["spec"]["limits"].pop("nodes", None)
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
    r, spec = _run([np_, NODECLASS, _dp_configmap(**{"ts-4": (4, False)}), ns, quota])
    pool = _pool(spec, "h100-ts")
    assert pool["sharing"]["replicas"] == 4 and pool["sharing"]["renameByDefault"] is False
    # 32 advertised nvidia.com/gpu = 1 node of 8 GPUs x 4 replicas: 8 physical GPUs
    assert pool["karpenter"]["maxGPUs"] == 8
    [over] = [d for d in r.diagnostics if d.code == "GP954"]
    assert "grant 64 nvidia.com/gpu" in over.message and "advertise 32" in over.message
    assert "GP941" not in _codes(r)
