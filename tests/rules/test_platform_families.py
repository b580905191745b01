"""The same platform fact checked on every platform gpuplan provisions on
(gpuplan.provisioning.pools.platforms: the spec's provisioners, Karpenter once per cloud).

Two rule families read a table of every platform:

- kept config names (gpuplan.provisioning.pools.NODE_LABELS): a pool whose nodes get their labels
  when they are made keeps every old device-plugin config name until it is retired; a pool
  relabelled in place (static, AKS) keeps only the name of its last change;
- the MIG-autoscaling refusal (gpuplan.rules.autoscaler.MIG_AUTOSCALING): an autoscaled pool
  whose nodes advertise no nvidia.com/gpu is refused by the code the table names, or the table
  says why the platform is exempt.

Each test iterates every platform; a platform added without a row in the tables and a fleet here
fails them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.outputkit import compile_ok, one
from tests.rules.helpers import Run, edit

from gpuplan.identity import KEPT_CONFIGS_ANNOTATION
from gpuplan.output.tree import write_tree
from gpuplan.provisioning.pools import NODE_LABELS, platforms
from gpuplan.rules.autoscaler import MIG_AUTOSCALING

REPO = Path(__file__).resolve().parents[2]
CM = "gpu-operator/device-plugin-config.yaml"


def _example(name: str) -> str:
    return (REPO / "examples" / f"{name}.yaml").read_text(encoding="utf-8")


GKE_OPERATOR = "        driver: gpu-operator\n        imageType: UBUNTU_CONTAINERD\n"
BATCH_L4 = """
    - name: batch-l4
      gpu: L4
      karpenter:
        instanceTypes: [g6.12xlarge]
        capacityTypes: [on-demand]
        maxGPUs: 8
        amiFamily: AL2023
        amiVersion: v20260714
      sharing: {mode: time-slicing, replicas: 2, renameByDefault: false}

  tiers:
    - name: batch
      pool: batch-l4
      workload: batch
      priority: 1000
"""

# platform -> (fleet, pool, the pool's sharing line, three sharings in a row): a pool-local change
# of the device-plugin config, twice
SHARING_CHANGES: dict[str, tuple[str, str, str, tuple[str, str, str]]] = {
    "static": ("fleet", "dev-a100", "sharing: {mode: time-slicing, replicas: 4, renameByDefault: true}",
               ("{mode: time-slicing, replicas: 4, renameByDefault: true}",
                "{mode: time-slicing, replicas: 8, renameByDefault: true}",
                "{mode: time-slicing, replicas: 6, renameByDefault: true}")),
    "karpenter-aws": ("aws-burst", "batch-l4", "sharing: {mode: time-slicing, replicas: 2, renameByDefault: false}",
                      ("{mode: time-slicing, replicas: 2, renameByDefault: false}",
                       "{mode: time-slicing, replicas: 4, renameByDefault: false}",
                       "{mode: time-slicing, replicas: 3, renameByDefault: false}")),
    "karpenter-azure": ("aks-nap", "batch-a100", "sharing: {mode: exclusive}",
                        ("{mode: exclusive}", "{mode: time-slicing, replicas: 2, renameByDefault: false}",
                         "{mode: time-slicing, replicas: 3, renameByDefault: false}")),
    "gke": ("gke", "notebooks-l4", "sharing: {mode: time-slicing, replicas: 4}",
            ("{mode: time-slicing, replicas: 4, renameByDefault: false}",
             "{mode: time-slicing, replicas: 2, renameByDefault: false}",
             "{mode: time-slicing, replicas: 3, renameByDefault: false}")),
    "aks": ("aks", "nb-t4", "sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}",
            ("{mode: time-slicing, replicas: 4, renameByDefault: false}",
             "{mode: time-slicing, replicas: 2, renameByDefault: false}",
             "{mode: time-slicing, replicas: 3, renameByDefault: false}")),
    "capi": ("onprem-capi", "notebooks-l40s", "sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}",
             ("{mode: time-slicing, replicas: 4, renameByDefault: false}",
              "{mode: time-slicing, replicas: 2, renameByDefault: false}",
              "{mode: time-slicing, replicas: 3, renameByDefault: false}")),
}


def _fleet_text(name: str) -> str:
    text = _example(name)
    if name == "gke":  # the L4 notebooks on the GPU Operator path
        text = edit(text, "        maxGPUs: 8\n        spot: true\n", "        maxGPUs: 8\n        spot: true\n" + GKE_OPERATOR)
    if name == "aws-burst":  # a time-sliced Karpenter pool of L4s for batch jobs
        text = edit(text, "\n  tiers:\n", BATCH_L4)
    return text


def _pool_sharing(text: str, pool: str, line: str, sharing: str) -> str:
    """``text`` with ``pool``'s sharing line (the first after its name) set to ``sharing``."""
    start = text.index(f"    - name: {pool}\n")
    at = text.index(line, start)
    return text[:at] + f"sharing: {sharing}" + text[at + len(line):]


def _kept_after_two_changes(tmp_path: Path, platform: str) -> tuple[set[str], dict]:
    """Build the platform's fleet, change the pool's sharing twice, building each over the tree;
    (the old config names of the pool the last ConfigMap still has, its kept annotation)."""
    name, pool, line, sharings = SHARING_CHANGES[platform]
    base = _fleet_text(name)
    spec = tmp_path / "fleet.yaml"
    tree = tmp_path / "generated"
    names = []
    c = None
    for sharing in sharings:
        spec.write_text(_pool_sharing(base, pool, line, sharing), encoding="utf-8")
        c = compile_ok(spec)
        write_tree(tree, c.files, force=True)
        names.append({k for k in one(c, CM)["data"] if k.startswith(f"{pool}-")})
    assert c is not None
    first, second = names[0], names[1] - names[0]
    assert len(first) == len(second) == 1, f"{platform}: each build gives {pool} a new config name"
    ann = one(c, CM)["metadata"].get("annotations", {}).get(KEPT_CONFIGS_ANNOTATION)
    return names[-1] & (first | second), json.loads(ann) if ann else {}, first


def test_every_platform_is_decided_in_both_families():
    """Each table has exactly the platforms gpuplan provisions on, each row with its reason."""
    assert set(NODE_LABELS) == set(platforms())
    assert set(MIG_AUTOSCALING) == set(platforms())
    assert set(SHARING_CHANGES) == set(platforms()) == set(MIG_SHAPES)
    for table in (NODE_LABELS, MIG_AUTOSCALING):
        assert all(why for _, why in table.values())


@pytest.mark.parametrize("platform", platforms())
def test_kept_config_names_follow_how_the_platform_labels_nodes(tmp_path, platform):
    """Labels set at node creation: both older names stay (old nodes of either build may still
    run). Relabelled in place: only the last change's name (its nodes carry it until the relabel:
    nfd-master at the next sync wave, AKS once the agent pool is applied), never the first."""
    kept, ann, first = _kept_after_two_changes(tmp_path, platform)
    pool = SHARING_CHANGES[platform][1]
    if NODE_LABELS[platform][0]:
        assert len(kept) == 2, f"{platform}: both old names of {pool} are kept"
    elif platform == "static":
        # a static pool rolls each change a node at a time (gpuplan.provisioning.rollout): after the
        # second change one node still holds the first name and the other the second, until nfd-master
        # relabels it to the third
        assert len(kept) == 2, f"{platform}: the names the pool's held and relabelled nodes carry"
    else:
        assert len(kept) == 1 and not kept & first, f"{platform}: relabelled in place, only the last old name"
    assert set(ann) == kept and set(ann.values()) == {pool}


# platform -> (fleet, edits (old, new) that make one of its pools an autoscaled pool whose nodes
# advertise no nvidia.com/gpu, the pool)
MIG_SHAPES: dict[str, tuple[str, tuple[tuple[str, str], ...], str]] = {
    "static": ("fleet", (), "infer-a100"),  # MIG mixed already: nvidia.com/mig-* only
    "karpenter-aws": ("aws-burst", (("        nodeOverlay: true\n", ""),), "mig-a100"),
    "karpenter-azure": ("aks-nap", (("      sharing: {mode: exclusive}\n      pricePerGPUHour: 1.10\n",
                                     "      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}\n"
                                     "      pricePerGPUHour: 1.10\n"),), "batch-a100"),
    "gke": ("gke", (("        maxGPUs: 8\n        minNodes: 2\n", "        maxGPUs: 8\n        minNodes: 2\n"
                     + GKE_OPERATOR),), "infer-a100"),
    "aks": ("aks", (("strategy: single", "strategy: mixed"),), "infer-a100"),
    "capi": ("onprem-capi", (("        maxGPUs: 24\n        minNodes: 3\n", "        maxGPUs: 24\n        minNodes: 1\n"),),
             "infer-a100"),
}
REFUSALS = {code for code, _ in MIG_AUTOSCALING.values() if code}


@pytest.mark.parametrize("platform", platforms())
def test_the_mig_autoscaling_refusal_covers_every_platform(tmp_path, platform):
    """A pool of that platform whose nodes advertise only nvidia.com/mig-*: refused by the code
    the table names, naming the pool; an exempt platform gets none of the family's codes."""
    name, edits, pool = MIG_SHAPES[platform]
    text = _example(name)
    for old, new in edits:
        text = edit(text, old, new)
    code, _ = MIG_AUTOSCALING[platform]
    diags = [d for d in Run(tmp_path)(text) if d.code in REFUSALS]
    if code is None:
        assert not diags, f"{platform} is exempt"
    else:
        assert code in [d.code for d in diags if pool in d.message], platform


# --- upgrade protection for job pools ---------------------------------------------------------

from gpuplan.provisioning.pools import JOB_POOL_UPGRADES  # noqa: E402

# platform -> (example, its training or batch pool)
JOB_POOLS = {
    "static": ("fleet", "train-a100"),
    "karpenter-aws": ("aws-burst", "train-h100"),
    "karpenter-azure": ("aks-nap", "batch-a100"),
    "gke": ("gke", "train-h100"),
    "aks": ("aks", "train-h100"),
    "capi": ("onprem-capi", "train-h100"),
}


def test_every_platform_says_who_upgrades_its_nodes():
    assert set(JOB_POOL_UPGRADES) == set(platforms()) == set(JOB_POOLS)


@pytest.mark.parametrize("platform", platforms())
def test_job_pools_are_protected_wherever_the_platform_upgrades_nodes_itself(tmp_path, platform):
    """A platform that replaces nodes by itself gets the protection its row names, on the job pool
    of its example (and, on GKE, the warning once the protection is off); one that does not is
    exempt with its reason."""
    from gpuplan.compiler import compile_fleet

    upgrader, protection = JOB_POOL_UPGRADES[platform]
    assert protection
    example, pool = JOB_POOLS[platform]
    c = compile_ok(REPO / "examples" / f"{example}.yaml")
    if upgrader is None:
        return
    if platform.startswith("karpenter-"):
        budgets = one(c, f"pools/{pool}/nodepool.yaml")["spec"]["disruption"]["budgets"]
        assert {"nodes": "0", "reasons": ["Drifted"]} in budgets
    elif platform == "gke":
        assert one(c, f"provisioning/gke/{pool}.yaml")["spec"]["management"]["autoUpgrade"] is False
        text = _example(example)
        assert "        autoUpgrade: false\n" in text
        p = tmp_path / "fleet.yaml"
        p.write_text(text.replace("        autoUpgrade: false\n", "", 1))
        off = compile_fleet(p, out_dir=tmp_path / "generated")
        assert [d.code for d in off.diagnostics if d.code == "GP980"] == ["GP980"]
    elif platform == "aks":
        settings = one(c, f"provisioning/aks/{pool}/agentpool.yaml")["spec"]["upgradeSettings"]
        assert settings["undrainableNodeBehavior"] == "Cordon"
    else:
        pytest.fail(f"{platform} upgrades nodes by itself, but this test does not check its protection")
