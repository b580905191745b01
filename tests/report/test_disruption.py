"""Disruptive changes, listed first by `gpuplan plan --base` and `gpuplan diff`:
namespace removals, nodes repartitioned or reconfigured, pools replaced,
PriorityClasses recreated, driver upgrades."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpuplan.cli.main import cli
from gpuplan.compiler import check_fleet, render_files
from gpuplan.report.disruption import disruptions
from tests.report.helpers import write
from tests.rules.helpers import BASE, edit


def plan(*args):
    return CliRunner().invoke(cli, ["plan", *map(str, args)], catch_exceptions=False)


def tree(tmp_path, text, name):
    rf = check_fleet(write(tmp_path, text, name)).resolved
    assert rf is not None
    return render_files(rf, "fleet.yaml")


TWO_TENANTS = edit(BASE, "  tenants:\n", "  tenants:\n    - {name: beta, namespaces: [beta-ns]}\n")


def test_namespace_removal_is_destructive_and_first(tmp_path):
    old, new = write(tmp_path, TWO_TENANTS, "old.yaml"), write(tmp_path, BASE, "new.yaml")
    # no hand step (#27): the AppProject arrives through Git and keeps beta-ns while the
    # root sync prunes it; the Namespace is kept (Prune=false) and holds nothing
    for fmt, first in (("text", "DISRUPTIVE CHANGES (1)"), ("markdown", "### :warning: Disruptive changes (1)")):
        r = plan(new, "--base", old, "--format", fmt)
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith(first), r.stdout[:200]
        head = r.stdout.split("Capacity: small")[0]
        assert "Namespace beta-ns" in head and "destructive" in head.lower()
    data = json.loads(plan(new, "--base", old, "--format", "json").stdout)
    assert [d["severity"] for d in data["disruptive"]] == ["destructive"]
    assert data["disruptive"][0]["subject"] == "Namespace beta-ns"
    html = plan(new, "--base", old, "--format", "html").stdout
    assert html.index("Namespace beta-ns") < html.index("Capacity: small</h1>")


def test_no_disruption_says_so(tmp_path):
    from gpuplan.report.disruption import NONE_OF, SEVERITY_ORDER

    old, new = write(tmp_path, BASE, "old.yaml"), write(tmp_path, edit(BASE, "serve: 8,", "serve: 10,"), "new.yaml")
    r = plan(new, "--base", old)
    assert r.stdout.startswith("No disruptive changes")
    head = r.stdout.splitlines()[0]
    assert set(NONE_OF) == set(SEVERITY_ORDER) and all(NONE_OF[s] in head for s in SEVERITY_ORDER)


WITHOUT_NOTEBOOKS = edit(edit(BASE, "    - {name: notebooks, pool: dev, workload: interactive, priority: 10, preemption: Never}\n",
                              ""), ", notebooks: 16", "")


def test_removed_tier_names_the_namespace_its_pods_keep(tmp_path):
    old, new = tree(tmp_path, BASE, "old.yaml"), tree(tmp_path, WITHOUT_NOTEBOOKS, "new.yaml")
    rf = check_fleet(write(tmp_path, BASE, "res.yaml")).resolved
    from gpuplan.report.transition import tier_resources

    ds = [d for d in disruptions(old, new, tiers=tier_resources(rf)) if d.severity == "revoked"]
    assert [d.subject for d in ds] == ["Namespace alpha-ns (tier notebooks)"]
    assert "requests.nvidia.com/gpu.shared 16 -> 0" in ds[0].message
    assert "kubectl get pods -n alpha-ns" in ds[0].message and '=="gpuplan-notebooks"' in ds[0].message
    # without the spec's resources, the tree's quotas bound what the class could hold
    (bound,) = [d for d in disruptions(old, new) if d.severity == "revoked"]
    assert "at most one of:" in bound.message and "requests.nvidia.com/gpu.shared 16 -> 0" in bound.message


def test_lowered_quota_is_revoked_raised_is_not(tmp_path):
    old = tree(tmp_path, BASE, "old.yaml")
    lowered = tree(tmp_path, edit(BASE, "serve: 8,", "serve: 6,"), "low.yaml")
    rf = check_fleet(write(tmp_path, BASE, "res.yaml")).resolved
    from gpuplan.report.transition import tier_resources

    ds = [d for d in disruptions(old, lowered, tiers=tier_resources(rf)) if d.severity == "revoked"]
    assert [d.subject for d in ds] == ["Namespace alpha-ns (tier serve)"]
    assert "requests.nvidia.com/mig-1g.10gb 8 -> 6" in ds[0].message
    raised = tree(tmp_path, edit(BASE, "serve: 8,", "serve: 10,"), "high.yaml")
    assert not [d for d in disruptions(old, raised, tiers=tier_resources(rf)) if d.severity == "revoked"]


def test_diff_and_plan_base_show_the_revoked_tier(tmp_path, gpuplan_cli):
    old, new = write(tmp_path, BASE, "old.yaml"), write(tmp_path, WITHOUT_NOTEBOOKS, "new.yaml")
    r = plan(new, "--base", old)
    assert "[REVOKED] Namespace alpha-ns (tier notebooks)" in r.stdout.split("Capacity: small")[0]
    out = tmp_path / "generated"
    assert gpuplan_cli("build", str(old), "-o", str(out)).returncode == 0
    d = gpuplan_cli("diff", str(new), "-o", str(out))
    assert "No disruptive changes" not in d.stdout
    assert "[REVOKED] Namespace alpha-ns (tier notebooks)" in d.stdout
    assert "--field-selector=status.phase!=Succeeded,status.phase!=Failed" in d.stdout


def test_mig_layout_change_drains_the_pool_nodes_only(tmp_path):
    old = tree(tmp_path, BASE, "old.yaml")
    new = tree(tmp_path, edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 2}").replace(
        "serve, pool: infer, profile: 1g.10gb", "serve, pool: infer, profile: 3g.40gb"), "new.yaml")
    ds = disruptions(old, new)
    drains = [d for d in ds if d.severity == "drain"]
    assert [d.subject for d in drains] == ["node n3 (pool infer)"]
    assert "mig-manager repartitions" in drains[0].message and "drain its GPU pods" in drains[0].message


def test_sharing_change_reconfigures_the_pool_nodes(tmp_path):
    old = tree(tmp_path, BASE, "old.yaml")
    new = tree(tmp_path, edit(BASE, "replicas: 4}", "replicas: 8}"), "new.yaml")
    ds = disruptions(old, new)
    assert [(d.severity, d.subject) for d in ds] == [("reconfigure", "node n4 (pool dev)")]


def test_priority_and_driver_changes(tmp_path):
    old = tree(tmp_path, BASE, "old.yaml")
    text = edit(BASE, "priority: 10, preemption: Never", "priority: 20, preemption: Never")
    text = edit(text, "    gitops:\n", "    gpuOperator: {driverVersion: 580.95.05}\n    gitops:\n")
    ds = disruptions(old, tree(tmp_path, text, "new.yaml"))
    got = {(d.severity, d.subject) for d in ds}
    assert ("replace", "PriorityClass gpuplan-notebooks") in got
    assert ("upgrade", "GPU driver") in got
    driver = next(d for d in ds if d.subject == "GPU driver")
    assert "595.91.07 -> 580.95.05" in driver.message


KARPENTER = edit(BASE, '    kubernetesVersion: "1.33"\n',
                 '    kubernetesVersion: "1.33"\n    aws: {clusterName: small, nodeRole: KarpenterNodeRole}\n'
                 '    gpuOperator: {toolkit: preinstalled}\n') + """\
"""


def test_karpenter_mig_pool_change_replaces_its_nodes(tmp_path):
    text = edit(KARPENTER, "      gpusPerNode: 4\n      nodes: [n3]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714, "
                "nodeOverlay: true}\n")
    old = tree(tmp_path, text, "old.yaml")
    new = tree(tmp_path, edit(text, "layout: {1g.10gb: 7}", "layout: {1g.10gb: 4, 3g.40gb: 1}"), "new.yaml")
    ds = disruptions(old, new)
    [np_] = [d for d in ds if d.subject == "NodePool infer"]
    assert np_.severity == "replace" and "nvidia.com/mig.config" in np_.message and "drifts" in np_.message


@pytest.mark.slow
def test_diff_lists_namespace_removal_first(tmp_path, gpuplan_cli):
    spec = write(tmp_path, TWO_TENANTS)
    assert gpuplan_cli("build", str(spec), "-o", str(tmp_path / "generated")).returncode == 0
    spec.write_text(BASE)
    for fmt, first in (("text", "DISRUPTIVE CHANGES (1)"), ("markdown", "### :warning: Disruptive changes (1)")):
        r = gpuplan_cli("diff", "--format", fmt, str(spec), "-o", str(tmp_path / "generated"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(first)
        assert r.stdout.index("Namespace beta-ns") < r.stdout.index("removed")


def test_job_pool_with_blocked_drift_is_told_to_roll(tmp_path):
    text = edit(KARPENTER, "      gpusPerNode: 4\n      nodes: [n3]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714, "
                "nodeOverlay: true}\n")
    text = edit(text, "profile: 1g.10gb, workload: inference", "profile: 1g.10gb, workload: training")
    old = tree(tmp_path, text, "old.yaml")
    new = tree(tmp_path, edit(text, "layout: {1g.10gb: 7}", "layout: {1g.10gb: 4, 3g.40gb: 1}"), "new.yaml")
    [np_] = [d for d in disruptions(old, new) if d.subject == "NodePool infer"]
    assert "drift is blocked" in np_.message and "delete its NodeClaims" in np_.message


def test_renamed_config_with_the_same_layout_is_not_a_drain(tmp_path):
    """Upgrading from a gpuplan that named configs gpuplan-<pool> renames every
    config; mig-manager finds the same layout applied and leaves the GPUs alone
    (mig-parted@v0.15.0 pkg/mig/reconfigure/reconfigure.go:142-146)."""
    import yaml as _yaml

    old = tree(tmp_path, BASE, "old.yaml")
    new = dict(old)
    text = new["gpu-operator/mig-parted-config.yaml"].decode()
    cm = [d for d in _yaml.safe_load_all(text) if d][0]
    configs = _yaml.safe_load(cm["data"]["config.yaml"])
    [name] = [n for n in configs["mig-configs"] if n != "all-disabled"]
    legacy = "gpuplan-infer"
    old["gpu-operator/mig-parted-config.yaml"] = text.replace(name, legacy).encode()
    old["pools/infer/node-labels.yaml"] = new["pools/infer/node-labels.yaml"].decode().replace(name, legacy).encode()
    [d] = disruptions(old, new)
    assert d.severity == "reconfigure" and "same layout" in d.message and d.subject == "node n3 (pool infer)"


# --- #27: hand steps and held syncs -------------------------------------------------------


def test_adding_a_tenant_needs_no_hand_step(tmp_path):
    """The AppProject reaches the cluster through its own Application: a new namespace
    is admitted without anyone applying bootstrap.yaml (tests/report/test_delivery_transitions.py)."""
    r = plan(write(tmp_path, TWO_TENANTS, "n.yaml"), "--base", write(tmp_path, BASE, "o.yaml"), "--format", "json")
    assert r.exit_code == 0, r.output
    assert [d for d in json.loads(r.stdout)["disruptive"] if d["severity"] == "hand-step"] == []


def test_a_tree_built_without_the_previous_one_is_refused_its_prunes(tmp_path):
    """A new tree rendered without the old one (no kept destination) drops beta-ns from
    the project; once the project Application syncs, Argo CD refuses to prune beta-ns's
    objects and fails every root sync: the report says so first."""
    from gpuplan.identity import QUOTA_NAME

    old = tree(tmp_path, TWO_TENANTS, "old.yaml")
    # the namespace's GPU quota is kept (never pruned), so only a pruned object of beta-ns is refused:
    # drop the protection by hand, as a tree edited before it had one
    old = {p: (d.replace(b"Prune=false,Delete=false", b"Delete=false") if p.startswith("tenants/beta") and b"ResourceQuota" in d
               and QUOTA_NAME.encode() in d else d) for p, d in old.items()}
    ds = disruptions(old, tree(tmp_path, BASE, "new.yaml"))
    assert ds[0].severity == "hand-step" and "beta-ns" in ds[0].subject
    assert "prune refused" in ds[0].message


def test_flux_namespace_removal_holds_nothing(tmp_path):
    old = TWO_TENANTS.replace("    gitops:\n", "    gitops:\n      engine: flux\n", 1)
    new = BASE.replace("    gitops:\n", "    gitops:\n      engine: flux\n", 1)
    assert old != TWO_TENANTS
    ds = disruptions(tree(tmp_path, old, "old.yaml"), tree(tmp_path, new, "new.yaml"))
    assert [d.severity for d in ds] == ["destructive"]
    assert "NO later change" not in ds[0].message


def test_ordered_by_risk_with_pools_and_node_counts(tmp_path):
    """#27 Build 6: replaced (or stranded) Karpenter nodes before static drains, drains before
    reconfigurations; a line per pool with its node counts, riskiest pool first."""
    text = edit(KARPENTER, "      gpusPerNode: 4\n      nodes: [n4]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714, "
                "nodeOverlay: true}\n")
    old = tree(tmp_path, text, "old.yaml")
    changed = edit(text, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 2}").replace(
        "serve, pool: infer, profile: 1g.10gb", "serve, pool: infer, profile: 3g.40gb")
    changed = edit(changed, "replicas: 4}", "replicas: 8}")
    ds = disruptions(old, tree(tmp_path, changed, "new.yaml"))
    order = [(d.severity, d.subject) for d in ds if d.subject in ("NodePool dev", "node n3 (pool infer)")]
    assert order == [("replace", "NodePool dev"), ("drain", "node n3 (pool infer)")]
    from gpuplan.report.disruption import by_pool, render_markdown, render_text

    # the new tree is rendered without the old one (no kept names): the old nodes of `dev` name a
    # config the new ConfigMap lacks until Karpenter replaces them (gpuplan.report.transition)
    dev = "pool dev: nodes stranded (Karpenter), every node replaced (Karpenter)"
    assert by_pool(ds) == [dev, "pool infer: 1 node drained"]
    assert f"  {dev}\n  pool infer: 1 node drained\n" in render_text(ds)
    assert f"Nodes by pool, riskiest first: {dev}; pool infer: 1 node drained." in render_markdown(ds)
    assert [d.severity for d in ds if "dev" in d.subject] == ["stranded", "replace"]


def test_a_driver_change_names_the_pools_it_drains_and_holds(tmp_path):
    """BASE's `train` pool runs a training tier: its nodes carry the upgrade controller's skip
    label (held); `infer` and `dev` are rolled, their GPU pods deleted node by node."""
    old = tree(tmp_path, BASE, "old.yaml")
    text = edit(BASE, "    gitops:\n", "    gpuOperator: {driverVersion: 580.95.05}\n    gitops:\n")
    [driver] = [d for d in disruptions(old, tree(tmp_path, text, "new.yaml")) if d.subject == "GPU driver"]
    assert "drains and upgrades pools dev, infer" in driver.message
    assert "pools train are held" in driver.message
    from gpuplan.report.disruption import by_pool

    assert by_pool([driver]) == ["pool dev: driver upgraded 1 node at a time by the upgrade controller",
                                 "pool infer: driver upgraded 1 node at a time by the upgrade controller",
                                 "pool train: driver held (roll its nodes by hand)"]


def test_a_per_pool_driver_change_is_reported_for_its_pool(tmp_path):
    """Static pools that differ in driver get one NVIDIADriver each: a change to one pool's driver
    names that pool only."""
    two = edit(BASE, "      nodes: [n3]\n", "      nodes: [n3]\n      driverVersion: 580.95.05\n")
    old = tree(tmp_path, two, "old.yaml")
    new = edit(BASE, "      nodes: [n3]\n", "      nodes: [n3]\n      driverVersion: 580.105.08\n")
    ds = [d for d in disruptions(old, tree(tmp_path, new, "new.yaml")) if d.subject.startswith("GPU driver")]
    assert [d.subject for d in ds] == ["GPU driver of pool infer"]
    assert "580.95.05 -> 580.105.08" in ds[0].message and "drains and upgrades pools infer" in ds[0].message


# --- what each engine does to each object: drivers rolled, reinstalled, classes recreated ----


EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml").read_text()
PIN = 'driverVersion: "595.91.07"'


def _example(tmp_path, text, name):
    return tree(tmp_path, text, name)


def test_a_driver_bump_is_rolled_by_the_upgrade_controller_not_replaced(tmp_path):
    """examples/fleet.yaml has one NVIDIADriver per static pool. A driver bump updates each in
    place (no Replace=true), so the upgrade controller rolls it node by node and holds the
    training pool; `plan --base` says so per pool."""
    (tmp_path / "old.yaml").write_text(EXAMPLE)
    (tmp_path / "new.yaml").write_text(EXAMPLE.replace(PIN, 'driverVersion: "595.95.01"'))
    new_tree = _example(tmp_path, EXAMPLE.replace(PIN, 'driverVersion: "595.95.01"'), "new.yaml")
    drivers = [d for d in yaml.safe_load_all(new_tree["gpu-operator/nvidiadrivers.yaml"]) if d]
    assert drivers and not any("Replace=true" in d["metadata"]["annotations"].get(
        "argocd.argoproj.io/sync-options", "") for d in drivers)
    ds = disruptions(_example(tmp_path, EXAMPLE, "old.yaml"), new_tree)
    assert {(d.severity, d.subject) for d in ds} == {
        ("upgrade", f"GPU driver of pool {p}") for p in ("train-a100", "infer-a100", "dev-a100")}
    r = plan(tmp_path / "new.yaml", "--base", tmp_path / "old.yaml")
    assert r.exit_code == 0, r.output
    head = r.stdout.split("\n\n")[0]
    assert "  pool infer-a100: driver upgraded 1 node at a time by the upgrade controller\n" in head + "\n"
    assert "  pool dev-a100: driver upgraded 1 node at a time by the upgrade controller\n" in head + "\n"
    assert "  pool train-a100: driver held (roll its nodes by hand)" in head
    assert "reinstalled" not in head and "recreated" not in head


def test_compiled_to_precompiled_reinstalls_the_driver_at_once(tmp_path):
    """usePrecompiled is immutable: the pool's NVIDIADriver moves to another name, the engine
    creates it and prunes the old one, and a new driver DaemonSet starts on every node at once."""
    pre = EXAMPLE.replace("      nodes: [gpu-a100-05, gpu-a100-06]\n",
                          "      nodes: [gpu-a100-05, gpu-a100-06]\n      os: ubuntu22.04\n      driverVersion: R595\n")
    (tmp_path / "old.yaml").write_text(EXAMPLE)
    (tmp_path / "new.yaml").write_text(pre)
    for old, new in (("old.yaml", "new.yaml"), ("new.yaml", "old.yaml")):
        r = plan(tmp_path / new, "--base", tmp_path / old)
        assert r.exit_code == 0, r.output
        head = r.stdout.split("\n\n")[0]
        assert head.startswith("DISRUPTIVE CHANGES (1)")
        assert "  pool infer-a100: driver reinstalled on every node at once" in head
        assert "[REPLACE] GPU driver of pool infer-a100:" in head and "NVIDIADriver infer-a100" in head
    data = json.loads(plan(tmp_path / "new.yaml", "--base", tmp_path / "old.yaml", "--format", "json").stdout)
    [d] = data["disruptive"]
    assert d["severity"] == "replace" and "infer-a100 -> infer-a100-precompiled" in d["message"]
    assert "reinstalled on every node of the pool at once" in d["message"]


def test_a_live_nvidiadriver_that_still_carries_replace_is_recreated(tmp_path):
    """A tree written while NVIDIADrivers carried Force=true,Replace=true: Argo CD honours the
    live object's option too (sync_context.go:1400), so the first change of each recreates it,
    and `gpuplan diff` says the driver is reinstalled at once, with the way to avoid it."""
    old = dict(_example(tmp_path, EXAMPLE, "old.yaml"))
    path = "gpu-operator/nvidiadrivers.yaml"
    old[path] = old[path].replace(b"argocd.argoproj.io/sync-options: SkipDryRunOnMissingResource=true",
                                  b"argocd.argoproj.io/sync-options: Force=true,Replace=true,SkipDryRunOnMissingResource=true")
    assert old[path].count(b"Replace=true") == 3
    ds = disruptions(old, _example(tmp_path, EXAMPLE.replace(PIN, 'driverVersion: "595.95.01"'), "new.yaml"))
    got = {d.subject: d for d in ds if d.subject.startswith("GPU driver")}
    assert {d.severity for d in got.values()} == {"replace"}
    d = got["GPU driver of pool train-a100"]  # the held pool too: nothing paces a new DaemonSet
    assert "live object still carries sync option Replace=true" in d.message
    assert "reinstalled on every node of the pool at once" in d.message
    assert "kubectl annotate nvidiadriver train-a100 argocd.argoproj.io/sync-options=" in d.message


@pytest.mark.parametrize("engine", ["argocd", "flux"])
def test_a_priority_change_says_how_the_engine_recreates_the_class(tmp_path, engine):
    base = BASE if engine == "argocd" else BASE.replace("    gitops:\n", "    gitops:\n      engine: flux\n", 1)
    old = tree(tmp_path, base, "old.yaml")
    new = tree(tmp_path, edit(base, "priority: 10, preemption: Never", "priority: 20, preemption: Never"), "new.yaml")
    [d] = [d for d in disruptions(old, new) if d.subject == "PriorityClass gpuplan-notebooks"]
    assert d.severity == "replace"
    want = ("Argo CD replaces it (sync option Replace=true): deleted, then created" if engine == "argocd" else
            "its apply fails on immutable value and Flux recreates it (kustomize.toolkit.fluxcd.io/force: enabled)")
    assert want in d.message
    assert "running pods keep the priority value they were admitted with" in d.message
