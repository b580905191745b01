"""Every example tree held to the node-facts tables (gpuplan/upstream/nodes/): the RuntimeClass
the GPU Operator gives its operands is a handler the nodes' containerd defines, the device
plugin's strategy is one the nodes' toolkit serves, and the labels and taints gpuplan expects
of each platform's nodes are the ones the table read from upstream."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from gpuplan import nodefacts
from tests.outputkit import REPO, compile_ok

VALUES = "gpu-operator/values.yaml"
EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.yaml"))


def _table(spec_pool: dict, cluster: dict) -> str | None:
    """Which table describes a pool's nodes, read from the spec as a user would: None where no
    operator operand runs on them or the owner's image decides."""
    toolkit = cluster.get("gpuOperator", {}).get("toolkit")
    k = spec_pool.get("karpenter")
    if k is not None:
        if "azure" in cluster and "aws" not in cluster:
            return "operator" if k.get("driver") == "gpu-operator" else "aks-nap"
        if k.get("amiFamily", "AL2023") != "AL2023":
            return None
        return "operator" if toolkit == "managed" else "eks-al2023"
    if "gke" in spec_pool and spec_pool["gke"].get("driver", "default") != "gpu-operator":
        return None
    if toolkit == "preinstalled":
        return "aks" if "aks" in spec_pool else None
    return "operator"


def _plugin_strategy(values: dict) -> str:
    """As the GPU Operator v26.7.0 sets it: the asset's `envvar`
    (assets/state-device-plugin/0500_daemonset.yaml:77-78), `cdi-annotations,cdi-cri` with CDI
    on (controllers/object_controls.go:1527-1530), `devicePlugin.env` last (:1620-1624)."""
    strategy = "cdi-annotations,cdi-cri" if values.get("cdi", {}).get("enabled", True) else "envvar"
    for e in values["devicePlugin"].get("env", []):
        if e["name"] == "DEVICE_LIST_STRATEGY":
            strategy = e["value"]
    return strategy


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_operator_runtime_class_is_a_handler_of_every_operand_node(example):
    assert_node_facts_hold(REPO / "examples" / f"{example}.yaml")


def assert_node_facts_hold(path) -> None:
    """The tree of ``path`` against the tables: runtime class and device-plugin strategy."""
    spec = yaml.safe_load(path.read_text())["spec"]
    c = compile_ok(path)
    if VALUES not in c.files:
        return
    values = yaml.safe_load(c.files[VALUES])
    handler = values.get("operator", {}).get("runtimeClass", nodefacts.fact("operator", "runtimeHandler"))
    tables = [_table(p, spec["cluster"]) for p in spec["pools"]]
    for pool, table in zip(spec["pools"], tables):
        if table is not None:
            assert handler == nodefacts.fact(table, "runtimeHandler"), (pool["name"], table)
    owned = [t for t in tables if t is not None and not nodefacts.table(t).node_config.get("fields")]
    strategy = _plugin_strategy(values)
    if owned:
        # the platform's toolkit keeps its defaults: only `envvar` reaches the GPUs
        assert strategy == "envvar"
        assert {d.code for d in c.diagnostics} >= {"GP991"}
    elif not values["toolkit"]["enabled"] and values["devicePlugin"]["enabled"]:
        assert strategy == "volume-mounts"


def _kwok_nodes(example: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "gpuplan", "nodes", str(REPO / "examples" / f"{example}.yaml"), "--kwok"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return [n for n in yaml.safe_load(out)["items"] if n["kind"] == "Node"]


@pytest.mark.parametrize("example,platform,label,value_fact", [
    ("aks", "aks", "label.accelerator", "label.accelerator.value"),
    ("gke", "gke", "label.accelerator", None),
    ("onprem-capi", "capi", "label.accelerator", None),
])
def test_nodes_carry_the_platform_labels_of_the_table(example, platform, label, value_fact):
    """The nodes gpuplan models (`gpuplan nodes`, the KWOK nodes of the API-server tests) carry the
    platform's labels under the keys the table read from upstream."""
    key = nodefacts.fact(platform, label)
    nodes = _kwok_nodes(example)
    labelled = [n for n in nodes if key in n["metadata"]["labels"]]
    assert labelled, f"no {example} node carries {key}"
    if value_fact:
        assert {n["metadata"]["labels"][key] for n in labelled} == {nodefacts.fact(platform, value_fact)}


def test_platform_taints_are_tolerated_by_the_operands():
    """AKS taints spot agent-pool nodes, GKE GPU nodes (the table's taints): the operator's
    DaemonSets and nfd-worker tolerate them, or no device plugin would advertise a GPU there."""
    for example, platform, name in (("aks", "aks", "taint.spot"), ("gke", "gke", "taint.gpu")):
        t = nodefacts.taint(platform, name)
        values = yaml.safe_load(compile_ok(REPO / "examples" / f"{example}.yaml").files[VALUES])
        want = {"key": t["key"], "operator": "Exists", "effect": t["effect"]}
        assert want in values["daemonsets"]["tolerations"], example
        assert want in values["node-feature-discovery"]["worker"]["tolerations"], example


def test_pools_whose_nodes_name_the_runtime_differently_are_refused(tmp_path):
    """AKS nodes define `nvidia-container-runtime`, a static node with its own toolkit `nvidia`
    (the README's prerequisite): the operator's one RuntimeClass cannot start operands on both."""
    from gpuplan.compiler import compile_fleet

    text = (REPO / "examples" / "aks.yaml").read_text()
    static = ("  pools:\n    - name: rack\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 8\n"
              "      nodes: [dgx-01]\n      sharing: {mode: exclusive}\n\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(text.replace("  pools:\n", static, 1))
    c = compile_fleet(p, out_dir=tmp_path / "generated")
    hits = [d for d in c.diagnostics if d.code == "GP990"]
    assert len(hits) == 1 and hits[0].is_error and not c.files
    line = text.replace("  pools:\n", static, 1).splitlines()[hits[0].line - 1]
    assert "- name: train-h100" in line, "reported at the first pool whose runtime differs from the first pool's"


def test_aks_with_the_operators_toolkit_keeps_nvidia_visible_devices_inert(tmp_path):
    """`aks.driver: gpu-operator` with the operator's driver and toolkit: the operator's `nvidia`
    handler everywhere, CDI on, and no GP991."""
    text = (REPO / "examples" / "aks.yaml").read_text()
    assert "driver: preinstalled\n      toolkit: preinstalled" in text
    text = text.replace("driver: preinstalled\n      toolkit: preinstalled", "driver: managed\n      toolkit: managed")
    text = text.replace("driver: aks", "driver: gpu-operator")
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    from gpuplan.compiler import compile_fleet

    c = compile_fleet(p, out_dir=tmp_path / "generated")
    assert not [d for d in c.diagnostics if d.is_error]
    assert "GP991" not in {d.code for d in c.diagnostics}
    values = yaml.safe_load(c.files[VALUES])
    assert "operator" not in values and values["cdi"]["enabled"] is True
    assert _plugin_strategy(values) == "cdi-annotations,cdi-cri"
