"""The DRA kubelet plugin starts on a MIG node only after mig-manager has applied the layout.

The plugin enumerates devices once, at start (kubernetes-sigs/dra-driver-nvidia-gpu@95932046
cmd/gpu-kubelet-plugin/nvlib.go:199-202) and nothing restarts it when mig-manager repartitions;
the DaemonSet controller runs a daemon pod only where its required node affinity matches and
deletes it where the node stops matching (kubernetes pkg/controller/daemon, NodeShouldRunDaemonPod).
The test runs the emitted values through that rule for the node states mig-manager passes through
(NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure: pending, then success or failed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import compile_fleet

REPO = Path(__file__).parents[2]


def _values(tmp_path):
    c = compile_fleet(REPO / "examples" / "dra.yaml", out_dir=tmp_path / "out")
    return yaml.safe_load(c.files["dra-driver/values.yaml"])["kubeletPlugin"]


def _runs_daemon(plugin: dict, labels: dict[str, str]) -> bool:
    """A DaemonSet pod's nodeSelector and required node affinity against a node's labels."""
    if any(labels.get(k) != v for k, v in plugin.get("nodeSelector", {}).items()):
        return False
    terms = (plugin.get("affinity") or {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms")
    if not terms:
        return True

    def ok(e):
        has, val = e["key"] in labels, labels.get(e["key"])
        return {"In": has and val in e.get("values", ()), "NotIn": not has or val not in e.get("values", ()),
                "Exists": has, "DoesNotExist": not has}[e["operator"]]
    return any(all(ok(e) for e in t["matchExpressions"]) for t in terms)


def test_the_plugin_waits_for_the_mig_layout_and_restarts_after_a_change(tmp_path):
    plugin = _values(tmp_path)
    mig = {"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/mig.config": "gpuplan-infer-a100-x",
           "gpuplan.dev/pool": "infer-a100"}
    assert not _runs_daemon(plugin, mig)  # a fresh node: mig-manager has not run yet
    assert not _runs_daemon(plugin, {**mig, "nvidia.com/mig.config.state": "pending"})
    assert _runs_daemon(plugin, {**mig, "nvidia.com/mig.config.state": "success"})
    assert not _runs_daemon(plugin, {**mig, "nvidia.com/mig.config.state": "failed"})
    # a DRA pool without a MIG configuration runs it at once; a device-plugin pool never
    assert _runs_daemon(plugin, {"nvidia.com/gpu.deploy.device-plugin": "false", "gpuplan.dev/pool": "infer-a100"})
    assert not _runs_daemon(plugin, {"nvidia.com/mig.config.state": "success"})


def test_the_plugin_runs_only_on_the_dra_pools_nodes(tmp_path):
    """The device-plugin switch (``nvidia.com/gpu.deploy.device-plugin=false``) is a label several
    hands write: nfd-master on static pools (and removes again), the GPU Operator (``true`` where it
    is missing), an operator pausing the plugin on one node by hand. The DRA plugin also requires
    gpuplan's own pool label to name a DRA pool: a device-plugin pool's node with the switch off
    never gets it, so DRA tiers never take its GPUs."""
    plugin = _values(tmp_path)
    off = {"nvidia.com/gpu.deploy.device-plugin": "false"}
    assert _runs_daemon(plugin, {**off, "gpuplan.dev/pool": "infer-a100", "nvidia.com/mig.config": "x",
                                 "nvidia.com/mig.config.state": "success"})
    assert not _runs_daemon(plugin, {**off, "gpuplan.dev/pool": "train-h100"})  # the device-plugin pool
    assert not _runs_daemon(plugin, off)  # a node of no gpuplan pool
    assert not _runs_daemon(plugin, {"gpuplan.dev/pool": "infer-a100"})  # the switch not (yet) off
