"""MIG at boot on Karpenter AL2023 pools: the userData's MIG script, run with bash against a
stand-in ``nvidia-smi`` that enforces what the driver enforces (MIG mode, GPU-instance
placements from gpuplan's catalog, no overlap) and a ``systemctl`` that records what it is
asked. The GPU instances the script leaves behind are checked against the pool's layout with
gpuplan's geometry engine.

Upstream behaviour modelled here (cited in gpuplan/lower/karpenter_aws.py):
- the EKS AL2023 NVIDIA AMI ships nvidia-smi, not nvidia-mig-parted
  (awslabs/amazon-eks-ami@v20260724 templates/al2023/provisioners/install-nvidia-driver.sh:265-279);
- cloud-init runs user scripts once per instance and ``scripts/per-boot`` on every boot, both in
  cloud-final (canonical/cloud-init@26.2 cc_scripts_user.py:23, cc_scripts_per_boot.py:20),
  and nodeadm-run, which starts kubelet, runs after cloud-final (amazon-eks-ami
  nodeadm-run.service:6);
- a MIG mode change the GPU cannot take without a reset stays pending until a reboot;
  GPU instances do not survive one;
- an instance that never registers is deleted by Karpenter after 15 minutes and replaced
  (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go:51-55,92-109);
- the GPU Operator never deploys mig-manager on a node whose ``nvidia.com/gpu.deploy.mig-manager``
  is ``"false"`` and never overwrites an existing value (NVIDIA/gpu-operator@v26.7.0
  assets/state-mig-manager/0600_daemonset.yaml:18, controllers/state_manager.go:363-370,486-490)."""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet
from gpuplan.identity import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, MIG_MANAGER_DEPLOY_LABEL
from gpuplan.lower.karpenter_aws import al2023_mig_script, al2023_userdata
from gpuplan.mig import check_layout
from tests.outputkit import REPO, compile_ok, docs, one

AWS = REPO / "examples" / "aws-burst.yaml"

# A stand-in for nvidia-smi: the state of the node's GPUs in a JSON file. It refuses what
# the driver refuses: GPU instances on a GPU not in MIG mode, a placement the profile does not
# have, an overlap.
FAKE_SMI = r'''
import json, os, sys
path = os.environ["FAKE_GPU_STATE"]
st = json.load(open(path))
a = sys.argv[1:]
st["calls"].append(a)
def save(): json.dump(st, open(path, "w"))
def opt(flag):
    return a[a.index(flag) + 1] if flag in a else None
out = []
rc = 0
i = opt("-i")
if a == ["-L"]:
    if st.get("no_driver"): rc = 9
    out = [f"GPU {n}: NVIDIA (UUID: GPU-{n})" for n in range(st["gpus"])]
elif a and a[0].startswith("--query-gpu=index"):
    out = [str(n) for n in range(st["gpus"])]
elif a[0] != "mig" and any(x.startswith("--query-gpu=mig.mode.") for x in a):
    q = next(x for x in a if x.startswith("--query-gpu=")).split(".")[-1]
    out = [st[q][int(i)]]
elif a[0] != "mig" and "-mig" in a:
    want = "Enabled" if opt("-mig") == "1" else "Disabled"
    if st["reset_refused"]:
        st["pending"][int(i)] = want
        out = [f"Warning: MIG mode is in pending {want.lower()} state for GPU {i}"]
    else:
        st["current"][int(i)] = st["pending"][int(i)] = want
elif a[0] == "mig":
    g = st["gis"].setdefault(i, [])
    if "-dci" in a:
        for gi in g: gi["ci"] = None
    elif "-dgi" in a:
        g.clear()
    elif "-cgi" in a:
        for spec in opt("-cgi").split(","):
            name, _, start = spec.partition(":")
            places = st["profiles"].get(name, [])
            size = next((z for s, z in places if str(s) == start), None)
            used = {s for gi in g for s in range(gi["start"], gi["start"] + gi["size"])}
            if (st["current"][int(i)] != "Enabled" or st.get("refuse_create") or size is None
                    or used & set(range(int(start), int(start) + size))):
                out.append(f"Failed to create GPU instances on GPU {i}: Insufficient Resources")
                rc = 6
                break
            st["next_id"] += 1
            g.append({"id": st["next_id"], "name": name, "start": int(start), "size": size,
                      "ci": name if "-C" in a else None})
            out.append(f"Successfully created GPU instance ID  {st['next_id']} on GPU  {i} using profile MIG {name} (ID  9)")
    elif "-cci" in a:
        gi = next(x for x in g if x["id"] == int(opt("-gi")))
        gi["ci"] = opt("-cci")
    elif "-lgi" in a:
        out = [f"|   {i}  MIG {x['name']}   9   {x['id']}   {x['start']}:{x['size']} |" for x in g]
save()
print("\n".join(out))
sys.exit(rc)
'''

FAKE_SYSTEMCTL = r'''#!/bin/sh
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
'''


class Node:
    """One EC2 instance of the pool: its GPUs (the stand-in's state), its disk and its boots."""

    def __init__(self, tmp: Path, pv, *, reset_refused: bool = False, **extra):
        self.tmp, self.pv = tmp, pv
        bin_ = tmp / "bin"
        bin_.mkdir()
        smi = bin_ / "nvidia-smi"
        smi.write_text(f"#!{sys.executable}\n" + FAKE_SMI)
        ctl = bin_ / "systemctl"
        ctl.write_text(FAKE_SYSTEMCTL)
        for f in (smi, ctl):
            f.chmod(0o755)
        n = pv.gpus_per_node
        self.state = tmp / "gpus.json"
        self.state.write_text(json.dumps({
            "gpus": n, "current": ["Disabled"] * n, "pending": ["Disabled"] * n,
            "reset_refused": reset_refused, "gis": {}, "next_id": 0, "calls": [],
            "profiles": {p.name: [list(x) for x in p.placements] for p in pv.gpu.profiles}, **extra,
        }))
        self.log = tmp / "systemctl.log"
        self.log.touch()
        self.root = tmp / "root"
        # the script's absolute paths, moved under the test's directory
        script = al2023_mig_script(pv)
        assert script is not None
        self.first = tmp / "part-002"
        self.first.write_text(script.replace("/var/lib/", f"{self.root}/var/lib/"))
        self.per_boot = self.root / "var/lib/cloud/scripts/per-boot/gpuplan-mig.sh"
        self.env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}",
                    "FAKE_GPU_STATE": str(self.state), "FAKE_SYSTEMCTL_LOG": str(self.log)}

    def boot(self, first: bool) -> subprocess.CompletedProcess:
        """cloud-final of one boot: the user script on the first, the per-boot copy after."""
        script = self.first if first else self.per_boot
        return subprocess.run(["bash", str(script)], env=self.env, capture_output=True, text=True, timeout=60)

    def reboot(self) -> None:
        """What a reboot does to the GPUs: a pending MIG mode takes effect, GPU instances are gone."""
        st = self.gpus()
        st["current"] = list(st["pending"])
        st["gis"] = {}
        self.state.write_text(json.dumps(st))

    def gpus(self) -> dict:
        return json.loads(self.state.read_text())

    def systemctl(self) -> list[str]:
        return self.log.read_text().splitlines()

    def layouts(self) -> dict[int, Counter]:
        return {int(i): Counter(gi["ci"] for gi in g) for i, g in self.gpus()["gis"].items() if g}


def _pool(spec: Path, name: str):
    checked = check_fleet(spec)
    assert not [d for d in checked.diagnostics if d.is_error], [str(d) for d in checked.diagnostics]
    return checked.resolved.pool_by_name[name]


def _assert_layout_applied(node: Node) -> None:
    """Every GPU carries exactly its layout, at placements gpuplan's geometry engine accepts."""
    pv = node.pv
    st = node.gpus()
    for idx, layout in enumerate(pv.gpu_layouts()):
        gis = st["gis"].get(str(idx), [])
        if layout is None:
            assert st["current"][idx] == "Disabled" and not gis, idx
            continue
        assert st["current"][idx] == "Enabled", idx
        assert Counter(gi["ci"] for gi in gis) == Counter({p: c for p, c in layout.items() if c}), idx
        check = check_layout(pv.gpu, layout)
        assert check.ok
        # the instances sit where the engine placed them, so the node is the proof's layout
        assert sorted((gi["ci"], gi["start"]) for gi in gis) == sorted((p.profile, p.start) for p in check.placements)


def test_userdata_applies_the_layout_before_kubelet(tmp_path):
    pv = _pool(AWS, "mig-a100")
    ud = email.message_from_string(al2023_userdata(pv))
    scripts = [p.get_payload() for p in ud.walk() if p.get_content_type() == "text/x-shellscript"]
    # the toolkit part first, the MIG part second: cloud-init runs them in that order
    assert len(scripts) == 2 and "nvidia-ctk" in scripts[0] and "gpuplan-mig" in scripts[1]
    node = Node(tmp_path, pv)
    r = node.boot(first=True)
    assert r.returncode == 0, r.stderr
    _assert_layout_applied(node)
    assert node.systemctl() == []  # no reboot, no power-off: cloud-final ends, nodeadm-run starts kubelet
    # what the device plugin advertises from these GPU instances (its config for the pool says
    # `mixed`: one nvidia.com/mig-<profile> per profile) is what the NodeOverlay tells Karpenter
    # and the capacity report counts (pv.node_resources)
    from gpuplan.identity import plugin_config_key
    from gpuplan.mig import resources_for_node

    rf = check_fleet(AWS).resolved
    tree = compile_ok(AWS)
    labels = one(tree, "pools/mig-a100/nodepool.yaml")["spec"]["template"]["metadata"]["labels"]
    plugin = yaml.safe_load(one(tree, "gpu-operator/device-plugin-config.yaml")["data"][
        labels["nvidia.com/device-plugin.config"]])
    assert labels["nvidia.com/device-plugin.config"] == plugin_config_key(rf, pv)
    strategy = plugin["flags"]["migStrategy"]
    assert strategy == "mixed"
    made = [dict(node.layouts()[i]) for i in range(pv.gpus_per_node)]
    advertised = resources_for_node(pv.gpu, made, strategy)
    assert advertised == pv.node_resources()
    overlay = one(tree, "pools/mig-a100/nodeoverlay.yaml")["spec"]["capacity"]
    assert overlay == {k: str(v) for k, v in advertised.items()}
    assert node.per_boot.read_text() == node.first.read_text()  # installed for later boots
    # a later reboot (EC2 maintenance, a kernel update) loses the GPU instances: the per-boot copy
    # puts them back before kubelet starts again
    node.reboot()
    assert node.layouts() == {}
    r = node.boot(first=False)
    assert r.returncode == 0, r.stderr
    _assert_layout_applied(node)


PER_GPU = """
    - name: mig-mixed
      gpu: A100-SXM4-80GB
      karpenter:
        instanceTypes: [p4de.24xlarge]
        capacityTypes: [on-demand]
        maxGPUs: 16
        amiFamily: AL2023
        amiVersion: v20260714
        nodeOverlay: true
      sharing:
        mode: mig
        strategy: mixed
        devices:
          - devices: [0, 1, 2]
            layout: {1g.10gb: 7}
          - devices: [3, 4]
            layout: {3g.40gb: 1, 2g.20gb: 2}
          - devices: [5]
            layout: {4g.40gb: 1, 1c.3g.40gb: 1}
          - devices: [6, 7]
"""


def test_per_gpu_layouts_are_applied_gpu_by_gpu(tmp_path):
    """Per-GPU layouts, MIG-disabled GPUs and a compute-instance profile. {3g.40gb: 1,
    2g.20gb: 2} fits only with the 3g instance at slice 4: placed by the engine, not left to
    the driver's default placement, whose choice depends on the creation order."""
    spec = tmp_path / "fleet.yaml"
    spec.write_text(AWS.read_text(encoding="utf-8").replace("\n  pools:\n", "\n  pools:\n" + PER_GPU, 1))
    pv = _pool(spec, "mig-mixed")
    node = Node(tmp_path, pv)
    r = node.boot(first=True)
    assert r.returncode == 0, r.stderr
    _assert_layout_applied(node)
    st = node.gpus()
    assert [gi["ci"] for gi in st["gis"]["5"] if gi["name"] == "3g.40gb"] == ["1c.3g.40gb"]
    assert st["current"][6:] == ["Disabled", "Disabled"]


def test_a_refused_gpu_reset_reboots_once(tmp_path):
    """EC2 can refuse the GPU reset MIG mode needs: the mode stays pending, the script
    reboots the instance once before kubelet starts, and the second boot applies the layout."""
    pv = _pool(AWS, "mig-a100")
    node = Node(tmp_path, pv, reset_refused=True)
    r = node.boot(first=True)
    assert r.returncode == 0, r.stderr
    assert node.layouts() == {}
    assert node.systemctl()[-1] == "reboot"
    assert "mask --runtime nodeadm-run.service kubelet.service" in node.systemctl()
    node.reboot()
    r = node.boot(first=False)
    assert r.returncode == 0, r.stderr
    _assert_layout_applied(node)
    assert node.systemctl()[-1] == "reboot"  # nothing more was asked of systemd on the second boot
    assert not (node.root / "var/lib/gpuplan/mig-reboot").exists()


def test_a_mode_still_pending_after_the_reboot_powers_off(tmp_path):
    """The one reboot did not help: the instance powers off before nodeadm-run, never
    registers, and Karpenter replaces it after its registration timeout (liveness.go:51-55)."""
    pv = _pool(AWS, "mig-a100")
    node = Node(tmp_path, pv, reset_refused=True)
    node.boot(first=True)
    st = node.gpus()
    st["gis"] = {}  # a reboot after which the GPUs still refuse the mode: nothing changes
    node.state.write_text(json.dumps(st))
    r = node.boot(first=False)
    assert r.returncode == 1
    assert node.systemctl()[-2:] == ["mask --runtime nodeadm-run.service kubelet.service", "poweroff"]
    assert node.layouts() == {}


def test_an_instance_that_cannot_be_created_powers_off(tmp_path):
    pv = _pool(AWS, "mig-a100")
    node = Node(tmp_path, pv, refuse_create=True)
    r = node.boot(first=True)
    assert r.returncode == 1
    assert node.systemctl() == ["mask --runtime nodeadm-run.service kubelet.service", "poweroff"]


def test_mig_manager_is_off_on_boot_mig_nodes_only():
    """The Karpenter AL2023 MIG pool's NodePool switches mig-manager off; the operator still
    runs it for the static MIG pool of examples/fleet.yaml, whose labels and mig-parted config
    are those of the operator path, and no fleet gets WITH_REBOOT any more."""
    aws = compile_ok(AWS)
    labels = one(aws, "pools/mig-a100/nodepool.yaml")["spec"]["template"]["metadata"]["labels"]
    assert labels[MIG_MANAGER_DEPLOY_LABEL] == "false"
    for pool in ("train-h100", "infer-l40s"):
        other = one(aws, f"pools/{pool}/nodepool.yaml")["spec"]["template"]["metadata"]["labels"]
        assert MIG_MANAGER_DEPLOY_LABEL not in other
    assert "env" not in one(aws, "gpu-operator/values.yaml")["migManager"]

    fleet = compile_ok(REPO / "examples" / "fleet.yaml")
    values = one(fleet, "gpu-operator/values.yaml")["migManager"]
    assert values["enabled"] is True and "env" not in values
    rules = [r for d in docs(fleet.files["pools/infer-a100/node-labels.yaml"]) if d["kind"] == "NodeFeatureRule"
             for r in d["spec"]["rules"]]
    static = next(r["labels"] for r in rules if MIG_CONFIG_LABEL in r.get("labels", {}))
    assert MIG_MANAGER_DEPLOY_LABEL not in static
    cm = one(fleet, "gpu-operator/mig-parted-config.yaml")
    assert static[MIG_CONFIG_LABEL] in cm["data"]["config.yaml"]
    # the static pool's nodes get no MIG script: no EC2NodeClass, nothing at boot
    assert not any(p.startswith("pools/infer-a100/") and p.endswith("ec2nodeclass.yaml") for p in fleet.files)


def _matches(term: dict, labels: dict) -> bool:
    for e in term["matchExpressions"]:
        if e["operator"] == "DoesNotExist" and e["key"] in labels:
            return False
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
    return True


def test_what_waits_for_the_mig_state_runs_on_boot_mig_nodes():
    """No mig-manager writes ``nvidia.com/mig.config.state`` on these nodes, so the NodePool
    says ``success`` (a node registers only once its layout exists): the DRA kubelet plugin's
    required node affinity (gpuplan.lower.dra.mig_gate; the DaemonSet controller runs a pod
    only where it matches) admits the node. Without the label it would match neither term, since
    the node carries ``nvidia.com/mig.config``."""
    from gpuplan.lower.dra import mig_gate

    labels = one(compile_ok(AWS), "pools/mig-a100/nodepool.yaml")["spec"]["template"]["metadata"]["labels"]
    assert labels[MIG_CONFIG_STATE_LABEL] == "success" and MIG_CONFIG_LABEL in labels
    terms = mig_gate()["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert any(_matches(t, labels) for t in terms)
    assert not any(_matches(t, {k: v for k, v in labels.items() if k != MIG_CONFIG_STATE_LABEL}) for t in terms)


@pytest.mark.parametrize("pool", ["train-h100"])
def test_pools_without_mig_get_no_mig_script(pool):
    assert al2023_mig_script(_pool(AWS, pool)) is None
