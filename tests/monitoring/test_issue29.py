"""Issue #29: the XID alert, shared-GPU pod mapping, and per-pool rules that follow what runs
on the pool (DRA, Bottlerocket). Every case runs the generated rules in the real promtool
against series shaped like what the exporters emit in that situation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import compile_fleet
from gpuplan.diagnostics import has_errors
from gpuplan.lower.monitoring import dcgm_exporter_values, left_out
from tests.monitoring.promkit import dcgm_labels, expected_alert, node_labels, run_promtool, series, write_rule_file
from tests.monitoring.test_rules import rule_files, xid_labels
from tests.outputkit import EXAMPLES, REPO, compile_ok

MON = "  monitoring: {release: kube-prometheus-stack}\n  tenants:"


def with_monitoring(tmp_path: Path, example: str):
    text = (REPO / "examples" / example).read_text(encoding="utf-8").replace("  tenants:", MON, 1)
    p = tmp_path / example
    p.write_text(text, encoding="utf-8")
    c = compile_fleet(p, out_dir=tmp_path / "generated")
    assert not has_errors(c.diagnostics), [d for d in c.diagnostics if d.is_error]
    return c


def rules_of(c, pool: str) -> list[dict]:
    d = rule_files(c)[f"monitoring/rules/pool-{pool}.yaml"]
    return [r for g in d["spec"]["groups"] for r in g["rules"]]


def promtool_test(tmp_path: Path, c, pool: str, tests: list[dict]) -> None:
    d = rule_files(c)[f"monitoring/rules/pool-{pool}.yaml"]
    write_rule_file(tmp_path / "r.yaml", d)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"rule_files": ["r.yaml"], "evaluation_interval": "1m",
                                                     "tests": tests}, sort_keys=False), encoding="utf-8")
    r = run_promtool("test", "rules", "t.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def one_rule(c, pool: str, alert: str, **labels: str) -> dict:
    [r] = [r for r in rules_of(c, pool) if r["alert"] == alert and all(r["labels"].get(k) == v for k, v in labels.items())]
    return r


# --- 4. XID ---------------------------------------------------------------------------------


def test_hardware_xid_fires_then_resolves_and_user_xid_never_fires(tmp_path):
    c = compile_ok(EXAMPLES["argocd"])
    rule = one_rule(c, "train-a100", "GPUXidError")
    node = series("kube_node_labels", node_labels("n1", "train-a100"), "1x200")
    hw = xid_labels("n1", "48")
    s = [node,
         series("DCGM_EXP_XID_ERRORS_COUNT", hw, "_x10 1x5"),  # XID 48 in the window minutes 10-14
         series("DCGM_FI_DEV_XID_ERRORS", dcgm_labels("n1"), "0x10 48x190"),  # the sticky gauge stays 48
         series("DCGM_EXP_XID_ERRORS_COUNT", xid_labels("n1", "13", "1"), "_x20 3x5"),  # a tenant's XID 13
         series("DCGM_FI_DEV_XID_ERRORS", dcgm_labels("n1", "1"), "0x20 13x180")]
    tests = [{"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "5m", "alertname": "GPUXidError", "exp_alerts": []},
        {"eval_time": "12m", "alertname": "GPUXidError", "exp_alerts": [expected_alert(rule, hw, 1)]},
        {"eval_time": "60m", "alertname": "GPUXidError", "exp_alerts": [expected_alert(rule, hw, 1)]},
        # an hour after the last sample in the window: resolved, though the gauge still says 48
        {"eval_time": "80m", "alertname": "GPUXidError", "exp_alerts": []},
        {"eval_time": "150m", "alertname": "GPUXidError", "exp_alerts": []},
    ]}]
    promtool_test(tmp_path, c, "train-a100", tests)


def test_dcgm_values_enable_the_xid_count():
    c = compile_ok(EXAMPLES["argocd"])
    v = dcgm_exporter_values(c.resolved)
    lines = [ln.split(",")[0].strip() for ln in v["config"]["data"].splitlines() if ln and not ln.startswith("#")]
    assert "DCGM_EXP_XID_ERRORS_COUNT" in lines
    # what the rules and dashboard read stays in the file that replaces the exporter's default
    for m in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
              "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
        assert m in lines, m
    assert v["config"]["create"] is True and v["config"]["name"]


# --- 5. shared GPUs -------------------------------------------------------------------------


def test_shared_resource_is_in_nvidia_resource_names():
    c = compile_ok(EXAMPLES["argocd"])
    env = {e["name"]: e["value"] for e in dcgm_exporter_values(c.resolved)["env"]}
    names = env["NVIDIA_RESOURCE_NAMES"].split(",")
    assert "nvidia.com/gpu.shared" in names  # dev-a100: time-slicing, renameByDefault
    assert "nvidia.com/gpu" not in names and not any(n.startswith("nvidia.com/mig-") for n in names)


def test_time_sliced_tier_at_0_and_80_percent(tmp_path):
    c = compile_ok(EXAMPLES["argocd"])
    rf = c.resolved
    [tier] = [t for t in rf.fleet.spec.tiers if rf.tier_pool(t).pool.sharing.mode == "time-slicing"][:1]
    pool = tier.pool
    rule = one_rule(c, pool, "GPUTierUnderused", tier=tier.name)
    ns = next(n for t in rf.fleet.spec.tenants for n, g in t.quotas.items() if g.get(tier.name, 0) > 0)
    node = series("kube_node_labels", node_labels("n1", pool), "1x400")
    idle = dcgm_labels("n1", "0", ns=ns)   # mapped: the exporter lists nvidia.com/gpu.shared
    busy = dcgm_labels("n1", "1", ns=ns, pod=f"{ns}-other")
    cases = [
        ([node, series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", idle, "0x400")],
         [("60m", []), ("180m", [expected_alert(rule, {"exported_namespace": ns}, 0)])]),
        ([node, series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", busy, "0.8x400")], [("180m", []), ("300m", [])]),
        # idle for 3h, then 80% busy: resolves
        ([node, series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", idle, "0x180 0.8x220")],
         [("179m", [expected_alert(rule, {"exported_namespace": ns}, 0)]), ("200m", [])]),
        # what the exporter emitted before: no pod labels on a shared GPU -> nothing to alert on
        ([node, series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels("n1", "2"), "0x400")], [("180m", [])]),
    ]
    tests = [{"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": t, "alertname": "GPUTierUnderused", "exp_alerts": a} for t, a in evals]}
        for s, evals in cases]
    promtool_test(tmp_path, c, pool, tests)


# --- 6. DRA and Bottlerocket pools ------------------------------------------------------------


def test_dra_pool_has_no_device_plugin_or_capacity_alert(tmp_path):
    c = with_monitoring(tmp_path, "dra.yaml")
    alerts = {r["alert"] for r in rules_of(c, "infer-a100")}
    assert "GPUDevicePluginNotReady" not in alerts and "GPUNodeCapacityOffPlan" not in alerts
    assert {"DCGMExporterNotReady", "GPUXidError", "MIGConfigFailed"} <= alerts
    # the device-plugin pool of the same fleet keeps both
    assert {"GPUDevicePluginNotReady", "GPUNodeCapacityOffPlan"} <= {r["alert"] for r in rules_of(c, "train-h100")}
    # a DRA node: no device plugin pod, nothing in Node.status.capacity -> quiet; a missing exporter fires
    n = node_labels("gpu-a100-01", "infer-a100")
    exp = one_rule(c, "infer-a100", "DCGMExporterNotReady")
    s = [series("kube_node_labels", n, "1x60")]
    promtool_test(tmp_path, c, "infer-a100", [{"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "30m", "alertname": "GPUDevicePluginNotReady", "exp_alerts": []},
        {"eval_time": "30m", "alertname": "GPUNodeCapacityOffPlan", "exp_alerts": []},
        {"eval_time": "30m", "alertname": "DCGMExporterNotReady", "exp_alerts": [expected_alert(exp, n, 1)]},
    ]}])
    rb = c.files["monitoring/RUNBOOK.md"].decode()
    assert "pool infer-a100: DRA pool" in rb


def test_bottlerocket_pool_has_no_operand_or_dcgm_alert(tmp_path):
    c = with_monitoring(tmp_path, "aws-burst.yaml")
    rf = c.resolved
    alerts = {r["alert"] for r in rules_of(c, "infer-l40s")}
    for a in ("GPUDevicePluginNotReady", "DCGMExporterNotReady", "GPUXidError", "GPUMemoryNearlyFull",
              "GPURowRemapFailure", "GPUUncorrectableECCError", "GPUTierUnderused"):
        assert a not in alerts, a
    assert "GPUQuotaNearlyExhausted" in alerts or not any(t.pool == "infer-l40s" for t in rf.fleet.spec.tiers)
    assert "GPUDevicePluginNotReady" in {r["alert"] for r in rules_of(c, "train-h100")}
    assert set(left_out(rf, rf.pool_by_name["train-h100"])) == set()
    # a Bottlerocket node with no operator pod at all: nothing fires
    s = [series("kube_node_labels", node_labels("b1", "infer-l40s"), "1x60")]
    promtool_test(tmp_path, c, "infer-l40s", [{"interval": "1m", "input_series": s, "alert_rule_test": [
        {"eval_time": "30m", "alertname": a, "exp_alerts": []}
        for a in ("GPUDevicePluginNotReady", "DCGMExporterNotReady")]}])
    assert "pool infer-l40s: the GPU Operator's operands are off" in c.files["monitoring/RUNBOOK.md"].decode()
