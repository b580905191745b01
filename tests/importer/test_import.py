"""`gpuplan import`: round trips of the examples' own clusters, hand-written clusters, hostile input, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import REPO, dump, snapshot

EXAMPLES = [("fleet.yaml", REPO / "generated"), ("aws-burst.yaml", REPO / "tests/golden/aws-burst"),
            ("flux-onprem.yaml", REPO / "tests/golden/flux-onprem"), ("kueue.yaml", REPO / "tests/golden/kueue"),
            ("dra.yaml", REPO / "tests/golden/dra"), ("volcano.yaml", REPO / "tests/golden/volcano")]


def _per_pair(spec: dict) -> dict:
    """(tenant, namespace, pool, profile) -> units: the grants as the built objects see
    them when a ClusterQueue holds one number for several tiers of a flavor."""
    where = {t["name"]: (t["pool"], t.get("profile")) for t in spec["tiers"]}
    out: dict = {}
    for t in spec["tenants"]:
        for ns, q in (t.get("quotas") or {}).items():
            for tier, n in q.items():
                k = (t["name"], ns) + where[tier]
                out[k] = out.get(k, 0) + n
    return out


def _run(items: list[dict]) -> object:
    return import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))


def _codes(r) -> list[str]:
    return [d.code for d in r.diagnostics]


@pytest.mark.parametrize("example,tree", EXAMPLES, ids=[e for e, _ in EXAMPLES])
def test_example_cluster_round_trips(example, tree):
    r = import_cluster(["-"], stdin=dump(snapshot(example, tree)))
    assert r.text is not None
    assert not [d for d in r.diagnostics if d.is_error or d.code == "GP959"], r.diagnostics
    assert r.round_trip.built and not r.round_trip.unexplained
    draft = yaml.safe_load(r.text)["spec"]
    want = yaml.safe_load((REPO / "examples" / example).read_text())["spec"]
    # what the cluster shows comes back: pools with their GPUs, nodes and sharing; tiers; tenants' quotas
    assert {p["name"]: (p["gpu"], p.get("nodes"), p["sharing"]["mode"]) for p in draft["pools"]} == \
        {p["name"]: (p["gpu"], p.get("nodes"), p["sharing"]["mode"]) for p in want["pools"]}
    for p in want["pools"]:
        got = next(x for x in draft["pools"] if x["name"] == p["name"])
        for k in ("layout", "devices", "replicas", "strategy"):
            assert got["sharing"].get(k) == p["sharing"].get(k), (p["name"], k)
        if "karpenter" in p:
            for k in ("instanceTypes", "maxGPUs", "amiFamily", "amiVersion"):
                assert got["karpenter"][k] == p["karpenter"][k]
    assert {(t["name"], t["pool"], t.get("profile"), t.get("priority", 0)) for t in draft["tiers"]} == \
        {(t["name"], t["pool"], t.get("profile"), t.get("priority", 0)) for t in want["tiers"]}
    if "queueing" not in want:
        assert {t["name"]: t.get("quotas") for t in draft["tenants"]} == \
            {t["name"]: t.get("quotas") for t in want["tenants"]}
    elif want["queueing"].get("engine") == "volcano":  # a leaf's deserved per pool is what the cluster shows
        assert _per_pair(draft) == _per_pair(want)
        assert draft["queueing"]["engine"] == "volcano"
        assert draft["queueing"]["volcano"]["chartVersion"] == want["queueing"]["volcano"]["chartVersion"]
        assert {t["name"]: t.get("queueing") for t in draft["tenants"]} == \
            {t["name"]: t.get("queueing") for t in want["tenants"]}
    else:  # Kueue: a ClusterQueue's nominal quota per flavor is what the cluster shows
        assert _per_pair(draft) == _per_pair(want)
        for k in ("fairSharing", "gangAdmission", "integrations", "topologyLevels"):
            assert draft["queueing"][k] == want["queueing"][k], k
        assert draft["queueing"]["kueue"]["chartVersion"] == want["queueing"]["kueue"]["chartVersion"]
        assert {t["name"]: {k: v for k, v in (t.get("queueing") or {}).items() if (k, v) != ("fairSharingWeight", 1)}
                for t in draft["tenants"]} == \
            {t["name"]: {k: v for k, v in (t.get("queueing") or {}).items() if (k, v) != ("fairSharingWeight", 1)}
             for t in want["tenants"]}
    wa, da = want["cluster"].get("allocation"), draft["cluster"].get("allocation")
    assert (da or {}).get("draDriverVersion") == (wa or {}).get("draDriverVersion")
    assert {p["name"]: (p.get("allocation") or {}).get("backend") for p in draft["pools"]} == \
        {p["name"]: (p.get("allocation") or {}).get("backend") for p in want["pools"]}
    assert {t["name"]: t.get("maxGPUsPerPod") for t in draft["tiers"] if t["pool"] in
            {p["name"] for p in want["pools"] if p.get("allocation")}} == \
        {t["name"]: t.get("maxGPUsPerPod") for t in want["tiers"] if t["pool"] in
         {p["name"] for p in want["pools"] if p.get("allocation")}}
    if example == "kueue.yaml":
        # the Kueue objects themselves were compared, not only counted as gpuplan's own
        assert not {"ClusterQueue", "ResourceFlavor", "LocalQueue"} & set(r.round_trip.added_kinds)
        assert [d.code for d in r.diagnostics if d.code == "GP958" and "ClusterQueue gpuplan-vision" in d.message]
    if example == "volcano.yaml":
        # the Queues were compared with those the draft builds, not counted as gpuplan's own
        assert "Queue" not in r.round_trip.added_kinds
        assert not any("volcano.sh/nodegroup-name" in (p.get("labels") or {}) for p in draft["pools"])
    if example == "dra.yaml":
        assert not {"DeviceClass", "ResourceClaimTemplate"} & set(r.round_trip.added_kinds)


def _node(name, product="NVIDIA-A100-SXM4-80GB", count="4", labels=None, taints=None):
    lb = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
          "nvidia.com/gpu.count": count, "nvidia.com/mig.capable": "true", "nvidia.com/gpu.memory": "81920"}
    lb.update(labels or {})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": lb, "resourceVersion": "42", "uid": "u-" + name,
                         "managedFields": [{"manager": "nfd-master", "operation": "Update"}], "annotations": None},
            "spec": {"taints": taints, "podCIDR": None},
            "status": {"nodeInfo": {"kubeletVersion": "v1.32.5"}, "capacity": {"nvidia.com/gpu": count}}}


def _cm(name, data, ns="gpu-operator"):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": data}


TS_CONFIG = "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
CLUSTER_POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                  "metadata": {"name": "cluster-policy", "generation": 3},
                  "spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "any"}},
                           "mig": {"strategy": "mixed"}, "driver": {"enabled": True, "version": "570.86.15"},
                           "toolkit": {"enabled": True}},
                  "status": {"state": "ready", "namespace": "gpu-operator", "conditions": []}}


def test_hand_written_time_slicing_config():
    r = _run([CLUSTER_POLICY, _cm("time-slicing-config", {"any": "version: v1\nflags:\n  migStrategy: none\n",
                                                            "a100-ts": TS_CONFIG}),
              _node("gpu-1", labels={"nvidia.com/device-plugin.config": "a100-ts"}),
              _node("gpu-2", labels={"nvidia.com/device-plugin.config": "a100-ts"})])
    spec = yaml.safe_load(r.text)["spec"]
    [pool] = spec["pools"]
    # upstream defaults (renameByDefault false, failRequestsGreaterThanOne false) are written out: gpuplan's differ
    assert pool["sharing"] == {"mode": "time-slicing", "replicas": 4, "renameByDefault": False,
                               "failRequestsGreaterThanOne": False}
    assert pool["nodes"] == ["gpu-1", "gpu-2"] and pool["gpusPerNode"] == 4
    assert spec["cluster"]["kubernetesVersion"] == "1.32"
    assert spec["cluster"]["gpuOperator"] == {"driverVersion": "570.86.15", "toolkit": "managed"}
    assert "# from device-plugin config a100-ts (ConfigMap time-slicing-config)" in r.text
    assert "TODO: named by gpuplan import" in r.text
    rt = r.round_trip
    assert rt.built and rt.conventions.get("config-names") and rt.conventions.get("binding") == 2
    # the pool's NoSchedule taint keeps pods without its toleration off the nodes: a difference, not a convention
    assert rt.unexplained == [f"Node gpu-{i}: taint gpuplan.dev/pool:NoSchedule added" for i in (1, 2)]


MIG_PARTED = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  mixed-a100:
    - device-filter: ["0x20B210DE"]
      devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - device-filter: ["0x20B210DE"]
      devices: [2, 3]
      mig-enabled: false
  broken:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
"""


def test_mixed_mig_fleet_and_impossible_config():
    r = _run([_cm("default-mig-parted-config", {"config.yaml": MIG_PARTED}),
              _cm("dp", {"mixed": "version: v1\nflags:\n  migStrategy: mixed\n"}),
              _node("mig-1", labels={"nvidia.com/mig.config": "mixed-a100", "nvidia.com/device-plugin.config": "mixed",
                                     "nvidia.com/mig.config.state": "success"}),
              _node("bad-1", labels={"nvidia.com/mig.config": "broken", "nvidia.com/device-plugin.config": "mixed",
                                     "nvidia.com/mig.config.state": "failed"})])
    pools = {p["name"]: p for p in yaml.safe_load(r.text)["spec"]["pools"]}
    # bad-1's mig-manager failed (mig.config.state=failed): a finding at the node, not capacity
    assert [p["nodes"] for p in pools.values()] == [["mig-1"]]
    mixed = next(p for p in pools.values() if p["nodes"] == ["mig-1"])
    assert mixed["sharing"] == {"mode": "mig", "strategy": "mixed",
                                "devices": [{"devices": [0, 1], "layout": {"1g.10gb": 7}}, {"devices": [2, 3]}]}
    [fault] = [d for d in r.diagnostics if d.code == "GP940"]
    assert "bad-1" in fault.message and fault.line is not None
    # the layout the failed node selects is still checked: it is why mig-manager failed
    [bad] = [d for d in r.diagnostics if d.code == "GP953"]
    assert "broken" in bad.message and bad.file == "<stdin>" and bad.line is not None
    assert "GP955" not in _codes(r)  # bad-1 still selects it


def test_karpenter_pool():
    nodepool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "gpu-spot", "resourceVersion": "99", "generation": 2,
                             "annotations": {"karpenter.sh/nodepool-hash": "123", "karpenter.sh/nodepool-hash-version": "v3"}},
                "spec": {"template": {"metadata": {"labels": {"team": "ml"}},
                                      "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                "name": "gpu"},
                                               "requirements": [
                                                   {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                    "values": ["g6e.12xlarge"]},
                                                   {"key": "karpenter.sh/capacity-type", "operator": "In",
                                                    "values": ["spot"]}],
                                               "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                                               "expireAfter": "336h"}},
                         "limits": {"nodes": "5"}, "disruption": {"consolidationPolicy": "WhenEmpty",
                                                                  "consolidateAfter": "5m"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                           "resources": {"nodes": "1", "nvidia.com/gpu": "4"}}}
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "gpu"},
                 "spec": {"amiSelectorTerms": [{"alias": "bottlerocket@v1.40.0"}], "role": "KarpenterNodeRole-x",
                          "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
                          "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}]},
                 "status": {"amis": [{"id": "ami-1"}]}}
    launched = _node("ip-10-0-0-1.ec2.internal", product="NVIDIA-L40S", labels={"karpenter.sh/nodepool": "gpu-spot"})
    r = _run([nodepool, nodeclass, launched])
    spec = yaml.safe_load(r.text)["spec"]
    [pool] = spec["pools"]  # the launched node belongs to the NodePool's pool, not to a static one
    assert pool["gpu"] == "L40S" and pool["labels"] == {"team": "ml"}
    assert pool["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert pool["karpenter"] == {"instanceTypes": ["g6e.12xlarge"], "capacityTypes": ["spot"], "maxGPUs": 20,
                                 "amiFamily": "Bottlerocket", "amiVersion": "v1.40.0", "expireAfter": "336h",
                                 "consolidateAfter": "5m"}
    assert spec["cluster"]["aws"] == {"clusterName": "prod", "nodeRole": "KarpenterNodeRole-x"}
    assert r.round_trip.built and r.round_trip.conventions.get("nodepool")


def _quota(ns, name, hard, scope=None):
    q = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
         "spec": {"hard": hard}, "status": {"hard": hard, "used": {k: "0" for k in hard}}}
    if scope:
        q["spec"]["scopeSelector"] = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                            "values": [scope]}]}
    return q


def _ns(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def test_quotas_without_tier_scopes_and_over_capacity():
    r = _run([_node("gpu-1", labels={"gpuplan.dev/pool": "train"}), _ns("team-a", {"cost-center": "42"}), _ns("team-b"),
              _quota("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "3"}),
              _quota("team-b", "gpus", {"requests.nvidia.com/gpu": "2", "requests.cpu": "100"}),
              {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
               "value": 1000, "globalDefault": False}])
    spec = yaml.safe_load(r.text)["spec"]
    # one tier for the unscoped quota's resource, named after its pool, with a TODO for its priority
    assert spec["tiers"] == [{"name": "train", "pool": "train"}]
    assert "gpuplan creates PriorityClass gpuplan-train with priority 0" in r.text
    assert {t["name"]: t["quotas"] for t in spec["tenants"]} == {"team-a": {"team-a": {"train": 3}},
                                                                  "team-b": {"team-b": {"train": 2}}}
    assert next(t for t in spec["tenants"] if t["name"] == "team-a")["labels"] == {"cost-center": "42"}
    [over] = [d for d in r.diagnostics if d.code == "GP954"]
    assert "5 nvidia.com/gpu" in over.message and "advertise 4" in over.message
    # gpuplan's own capacity rule refuses the same quotas: the draft is written, the round trip is not made
    assert "GP961" in _codes(r) and "GP410" in _codes(r) and not r.round_trip.built


def test_quotas_without_tier_scopes_round_trip():
    r = _run([_node("gpu-1", labels={"gpuplan.dev/pool": "train"}), _ns("team-a"),
              _quota("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "3"})])
    rt = r.round_trip
    # the hand-written quota is renamed to gpuplan-gpus; gpuplan adds the tier's PriorityClass
    assert rt.built and rt.conventions.get("quotas") == 1 and rt.conventions.get("priorityclasses") == 1
    assert rt.unexplained == ["Node gpu-1: taint gpuplan.dev/pool:NoSchedule added"] and "GP954" not in _codes(r)


def test_config_no_node_uses():
    r = _run([_cm("dp", {"default": "version: v1\nflags:\n  migStrategy: none\n", "ts-8": TS_CONFIG.replace("4", "8")}),
              {**CLUSTER_POLICY, "spec": {"devicePlugin": {"config": {"name": "dp", "default": "default"}}}},
              _node("gpu-1")])
    [unused] = [d for d in r.diagnostics if d.code == "GP955"]
    assert "ts-8" in unused.message and unused.line is not None
    assert yaml.safe_load(r.text)["spec"]["pools"][0]["sharing"] == {"mode": "exclusive"}


def test_hostile_names_are_escaped_and_refused():
    evil = "x: y\n::warning::pwned"
    r = _run([_node("gpu-1", labels={"gpuplan.dev/pool": evil, "rack": "r1"}),
              _ns("team-a", {"gpuplan.dev/tenant": "a#b"}), _quota("team-a", "q", {"requests.nvidia.com/gpu": "1"})])
    assert "GP951" in _codes(r)
    assert all("\n" not in d.message for d in r.diagnostics)
    spec = yaml.safe_load(r.text)
    # grouped by GPU instead of by the refused label; the tenant falls back to the namespace's name
    assert [p["name"] for p in spec["spec"]["pools"]] == ["a100-sxm4-80gb"]
    assert [t["name"] for t in spec["spec"]["tenants"]] == ["team-a"]
    assert "::warning::" not in r.text.replace("\\n::warning::", "")


def test_nothing_to_import_is_an_error():
    r = _run([_ns("default")])
    assert r.text is None and _codes(r) == ["GP950"]


def test_cli_output_file_and_force(tmp_path):
    from gpuplan.cli.main import cli

    src = tmp_path / "cluster.json"
    src.write_bytes(dump({"apiVersion": "v1", "kind": "List", "items": [_node("gpu-1")]}))
    out = tmp_path / "fleet.yaml"
    out.write_text("mine\n")
    runner = CliRunner()
    res = runner.invoke(cli, ["import", str(src), "-o", str(out)])
    assert res.exit_code == 1 and out.read_text() == "mine\n"
    res = runner.invoke(cli, ["import", str(src), "-o", str(out), "--force"])
    assert res.exit_code == 0 and yaml.safe_load(out.read_text())["kind"] == "Fleet"
    res = runner.invoke(cli, ["import", str(src)])
    assert res.exit_code == 0 and yaml.safe_load(res.stdout)["spec"]["pools"][0]["gpu"] == "A100-SXM4-80GB"
    assert runner.invoke(cli, ["import"]).exit_code == 2


def test_directory_input_and_kubectl_yaml(tmp_path):
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [_node("gpu-1")]}))
    (tmp_path / "cms.json").write_text(json.dumps(_cm("x", {"a": "b"})))
    r = import_cluster([str(tmp_path)])
    assert yaml.safe_load(r.text)["spec"]["pools"][0]["nodes"] == ["gpu-1"]


@pytest.mark.slow
def test_output_is_byte_identical_across_hash_seeds(tmp_path):
    src = tmp_path / "cluster.json"
    src.write_bytes(dump(snapshot("fleet.yaml", REPO / "generated")))
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        p = subprocess.run([sys.executable, "-m", "gpuplan", "import", str(src)], capture_output=True, env=env,
                           cwd=REPO)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout + p.stderr)
    assert outs[0] == outs[1]


def _kueue_cluster(tree=REPO / "tests/golden/kueue"):
    return snapshot("kueue.yaml", tree)


def test_kueue_extra_object_is_a_located_finding():
    """A LocalQueue gpuplan would not write is a GP959 at the input's line."""
    snap = _kueue_cluster()
    snap["items"].append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "extra", "namespace": "nlp-train"},
                          "spec": {"clusterQueue": "gpuplan-nlp"}})
    r = import_cluster(["-"], stdin=dump(snap))
    [w] = [d for d in r.diagnostics if d.code == "GP959"]
    assert "nlp-train/extra: removed" in w.message and w.file == "<stdin>"
    text = dump(snap).decode().splitlines()
    assert w.line is not None and '"name": "extra"' in "\n".join(text[w.line - 1:w.line + 6])


def test_kueue_flavor_without_pool_is_reported():
    snap = _kueue_cluster()
    rf = next(o for o in snap["items"] if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == "gpuplan-burst-h100")
    rf["spec"]["nodeLabels"] = {"gpu": "nowhere"}
    r = import_cluster(["-"], stdin=dump(snap))
    assert "GP963" in _codes(r)
    q = yaml.safe_load(r.text)["spec"]["queueing"]
    assert "burst-training" not in q["tiers"]


def test_dra_pool_from_node_label_and_quota_keys():
    snap = snapshot("dra.yaml", REPO / "tests/golden/dra")
    r = import_cluster(["-"], stdin=dump(snap))
    spec = yaml.safe_load(r.text)["spec"]
    assert spec["cluster"]["allocation"] == {"draDriverVersion": "v0.5.0"}
    assert "from Application gpuplan-dra-platform-dra-driver" in r.text
    # the nodes lose the device-plugin switch: the pool goes back to the device plugin, and gpuplan's
    # DeviceClasses and claim templates are findings, not silently dropped
    for o in snap["items"]:
        if o["kind"] == "Node":
            o["metadata"]["labels"].pop("nvidia.com/gpu.deploy.device-plugin", None)
    r = import_cluster(["-"], stdin=dump(snap))
    spec = yaml.safe_load(r.text)["spec"]
    assert "allocation" not in spec["cluster"] and all("allocation" not in p for p in spec["pools"])
    removed = [d for d in r.diagnostics if d.code == "GP959" and "removed" in d.message]
    assert any("DeviceClass.resource.k8s.io gpuplan-inference-small:" in d.message for d in removed)
    assert all(d.line is not None for d in removed)


def test_cli_machine_format_keeps_stdout_for_the_draft(tmp_path):
    from gpuplan.cli.main import cli

    src = tmp_path / "cluster.json"
    src.write_bytes(dump({"apiVersion": "v1", "kind": "List", "items": [
        _node("gpu-1", labels={"gpuplan.dev/pool": "p"}),
        _node("gpu-2", count="8", labels={"gpuplan.dev/pool": "p"})]}))  # GP957: the nodes of one pool disagree
    res = CliRunner().invoke(cli, ["import", str(src), "--format", "json"])
    assert res.exit_code == 0
    assert yaml.safe_load(res.stdout)["kind"] == "Fleet"
    assert "GP957" in res.stderr and "GP957" not in res.stdout
    out = tmp_path / "fleet.yaml"
    res = CliRunner().invoke(cli, ["import", str(src), "--format", "json", "-o", str(out)])
    assert res.exit_code == 0 and "GP957" in res.stdout and yaml.safe_load(out.read_text())["kind"] == "Fleet"
