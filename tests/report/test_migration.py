"""`gpuplan plan --base`: moving a pool from the device plugin to DRA (examples/dra.yaml and its base)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplan.cli.main import cli
from gpuplan.compiler import check_fleet, render_files
from gpuplan.report.migration import backends, migration_plan
from tests.outputkit import REPO

NEW = REPO / "examples" / "dra.yaml"
OLD = REPO / "examples" / "migration" / "before-dra.yaml"


def resolved(path):
    c = check_fleet(path)
    assert c.resolved is not None and not c.failed(), c.diagnostics
    return c.resolved


def migrate(old_rf, new_rf):
    return migration_plan(old_rf, new_rf, (render_files(old_rf, "fleet.yaml"), render_files(new_rf, "fleet.yaml")))


@pytest.fixture(scope="module")
def plan():
    return migrate(resolved(OLD), resolved(NEW))


def test_the_base_is_the_same_spec_with_the_pool_on_the_device_plugin():
    strip = lambda t: [l for l in t.splitlines() if not l.startswith("#")]
    new = [l for l in strip(NEW.read_text()) if l.strip() != "allocation: {backend: dra}"]
    assert new == strip(OLD.read_text())


def test_one_pool_moves_with_ordered_steps(plan):
    assert [(m.pool, m.old, m.new) for m in plan.moves] == [("infer-a100", "device-plugin", "dra")]
    steps = plan.moves[0].steps
    order = [next(i for i, s in enumerate(steps) if word in s) for word in ("cordon", "drain", "sync", "relabel", "uncordon")]
    assert order == sorted(order)
    assert "gpu-a100-01 gpu-a100-02" in steps[0]


def test_pods_keep_working_through_extended_resource_names(plan):
    effects = {t.tier: t for t in plan.tiers}
    assert set(effects) == {"inference-large", "inference-small"}  # not the training tier
    assert effects["inference-small"].unchanged and effects["inference-small"].resource == "nvidia.com/mig-1g.10gb"
    assert "gpuplan-inference-small" in effects["inference-small"].how


def test_without_extended_resources_pods_must_switch_to_claims(tmp_path):
    text = NEW.read_text().replace("allocation: {backend: dra}", "allocation: {backend: dra, extendedResources: false}")
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    m = migrate(resolved(OLD), resolved(p))
    assert all(not t.unchanged and "ResourceClaimTemplate" in t.how for t in m.tiers)


def test_quota_keys_added_and_request_keys_kept(plan):
    keys = {(q.namespace, q.key): (q.old, q.new) for q in plan.quotas}
    assert keys[("vision-serve", "gpuplan-inference-small.deviceclass.resource.k8s.io/devices")] == (None, "6")
    assert keys[("nlp-serve", "mig.nvidia.com.deviceclass.resource.k8s.io/devices")] == (None, "0")
    assert not any(k.startswith("requests.") for _, k in keys)  # pods with unchanged specs count as before


def test_objects_that_change(plan):
    labels = {o for _, o in plan.objects}
    assert "DeviceClass.resource.k8s.io gpuplan-inference-small" in labels
    assert "NodeFeatureRule.nfd.k8s-sigs.io gpuplan-pool-infer-a100" in labels
    assert "ResourceClaimTemplate.resource.k8s.io vision-serve/gpuplan-inference-small-x2" in labels
    assert not any("train-h100" in o for o in labels)


def test_no_state_runs_both_back_ends(plan):
    assert plan.overlaps == []


def test_backend_selection_model_could_see_an_overlap():
    import yaml

    files = {
        "gpu-operator/values.yaml": yaml.safe_dump({"devicePlugin": {"enabled": True}}).encode(),
        "dra-driver/values.yaml": yaml.safe_dump(
            {"kubeletPlugin": {"nodeSelector": {"gpuplan.dev/pool": "p"}}}).encode(),
    }
    # a DRA plugin selected by a label the device plugin ignores: both run
    assert backends({"gpuplan.dev/pool": "p"}, files) == {"device-plugin", "dra"}
    files["dra-driver/values.yaml"] = yaml.safe_dump(
        {"kubeletPlugin": {"nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "false"}}}).encode()
    assert backends({"nvidia.com/gpu.deploy.device-plugin": "false"}, files) == {"dra"}
    assert backends({}, files) == {"device-plugin"}


def test_plan_cli_prints_the_migration(tmp_path):
    r = CliRunner().invoke(cli, ["plan", str(NEW), "--base", str(OLD), "--format", "markdown"])
    assert r.exit_code == 0, r.output
    assert "## Allocation back-end migration" in r.output
    assert "No node runs both back-ends" in r.output
    r = CliRunner().invoke(cli, ["plan", str(NEW), "--base", str(OLD), "--format", "json"])
    data = json.loads(r.stdout if hasattr(r, "stdout") else r.output)
    assert data["migration"]["pools"][0]["to"] == "dra"


def test_no_section_without_a_back_end_change():
    r = CliRunner().invoke(cli, ["plan", str(OLD), "--base", str(OLD)])
    assert r.exit_code == 0 and "back-end migration" not in r.output


def test_moving_back_to_the_device_plugin_is_planned_too():
    m = migrate(resolved(NEW), resolved(OLD))
    assert [(p.pool, p.old, p.new) for p in m.moves] == [("infer-a100", "dra", "device-plugin")]
    assert any("device plugin" in s for s in m.moves[0].steps)
    assert m.overlaps == []
    assert {(q.key, q.old, q.new) for q in m.quotas if q.namespace == "nlp-serve"} >= {
        ("gpuplan-inference-small.deviceclass.resource.k8s.io/devices", "10", None)}


def test_karpenter_pools_move_by_drift(tmp_path):
    def karp(text):
        text = text.replace("""      gpusPerNode: 4
      nodes: [gpu-a100-01, gpu-a100-02]""", """      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, nodeOverlay: true}""")
        # a fleet of static and EKS AL2023 pools names its toolkit (GP640)
        text = text.replace("      driver: managed\n", "      driver: managed\n      toolkit: preinstalled\n")
        return text.replace("    allocation:\n", "    aws: {clusterName: c, nodeRole: r}\n    allocation:\n")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(karp(OLD.read_text()))
    b.write_text(karp(NEW.read_text()))
    m = migrate(resolved(a), resolved(b))
    assert m.moves[0].karpenter and any("drift" in s for s in m.moves[0].steps)
    assert m.overlaps == []


def test_a_pool_of_another_back_end_never_runs_the_dra_plugin():
    """The kubelet plugin's affinity names the DRA pools: a device-plugin pool's node whose
    switch reads "false" (set by hand, or left by another writer) runs neither back-end, not both."""
    files = render_files(resolved(NEW), "fleet.yaml")
    assert backends({"nvidia.com/gpu.deploy.device-plugin": "false", "gpuplan.dev/pool": "infer-a100"},
                    files) == {"dra"}
    assert backends({"nvidia.com/gpu.deploy.device-plugin": "false", "gpuplan.dev/pool": "train-h100"},
                    files) == set()


def test_karpenter_pools_leaving_dra_scale_their_claims_down_first(tmp_path):
    def karp(text):
        text = text.replace("""      gpusPerNode: 4
      nodes: [gpu-a100-01, gpu-a100-02]""", """      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, nodeOverlay: true}""")
        text = text.replace("      driver: managed\n", "      driver: managed\n      toolkit: preinstalled\n")
        return text.replace("    allocation:\n", "    aws: {clusterName: c, nodeRole: r}\n    allocation:\n")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(karp(NEW.read_text()))
    b.write_text(karp(OLD.read_text()))
    [move] = migrate(resolved(a), resolved(b)).moves
    assert move.new == "device-plugin"
    assert "before merging" in move.steps[0] and "Terminating" in move.steps[0]
