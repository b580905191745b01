"""The generated alert rules, run by the real promtool.

Every rule file passes ``promtool check rules``; every alerting rule gets a
``promtool test rules`` case with series that fire it (exact labels and
rendered annotations expected) and one with series that must not: healthy
values on the pool, and bad values on another pool, another namespace or
another MIG profile, so the selectors and joins are tested too."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from gpuplan.lower.monitoring import ALERTS, ksm_name, quota_object
from gpuplan.identity import quota_key
from gpuplan.resolve import ResolvedFleet
from tests.monitoring.promkit import (KSM, dcgm_labels, expected_alert, node_labels, run_promtool, series,
                                      write_rule_file)
from tests.outputkit import EXAMPLES, compile_ok, docs

OTHER_POOL = "not-this-pool"


@pytest.fixture(scope="module")
def compiled():
    return compile_ok(EXAMPLES["argocd"])


def rule_files(compiled) -> dict[str, dict]:
    out = {}
    for path, data in compiled.files.items():
        if path.startswith("monitoring/rules/"):
            [d] = docs(data)
            out[path] = d
    return out


def test_example_has_rules_for_every_pool_and_tier(compiled):
    rf: ResolvedFleet = compiled.resolved
    files = rule_files(compiled)
    assert set(files) == {f"monitoring/rules/pool-{p.name}.yaml" for p in rf.pools}
    tiers = {r["labels"]["tier"] for d in files.values() for g in d["spec"]["groups"] for r in g["rules"]
             if "tier" in r["labels"]}
    assert tiers == {t.name for t in rf.fleet.spec.tiers}
    alerts = {r["alert"] for d in files.values() for g in d["spec"]["groups"] for r in g["rules"]}
    # GPUNodeRegistrationTimeout is for MIG-at-boot pools only (tests/monitoring/test_boot_mig_alerts.py)
    assert alerts == set(ALERTS) - {"GPUNodeRegistrationTimeout"}, set(ALERTS) ^ alerts


def test_promtool_check_rules(compiled, tmp_path):
    files = rule_files(compiled)
    paths = [str(write_rule_file(tmp_path / Path(p).name, d)) for p, d in sorted(files.items())]
    r = run_promtool("check", "rules", *paths)
    assert r.returncode == 0, r.stdout + r.stderr  # promtool exits non-zero if any file fails


def test_promtool_check_rules_catches_a_bad_expression(tmp_path):
    """The check is live: a broken expression fails."""
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "sum(up"}]}]}))
    assert run_promtool("check", "rules", str(p)).returncode != 0


# --- one fire and one quiet case per alerting rule -----------------------------------------

Case = dict[str, Any]
T = "1m"


def _ctx(rf: ResolvedFleet, rule: dict) -> dict:
    return {"rf": rf, "pool": rf.pool_by_name.get(rule["labels"].get("pool", "")),
            "tier": rf.tier_by_name.get(rule["labels"].get("tier", ""))}


def _planned_capacity(pv, node: str, skip: str | None = None, value: int | None = None) -> list[dict]:
    out = []
    for res, count in pv.node_resources().items():
        if res == skip:
            if value is not None:
                out.append(series("kube_node_status_capacity",
                                  {**KSM, "node": node, "resource": ksm_name(res), "unit": "integer"},
                                  f"{value}x60"))
            continue
        out.append(series("kube_node_status_capacity",
                          {**KSM, "node": node, "resource": ksm_name(res), "unit": "integer"}, f"{count}x60"))
    return out


def capacity_cases(rf, rule, pv) -> tuple[Case, Case]:
    res = rule["labels"]["resource"]
    count = pv.node_resources()[res]
    fire_series = [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                   series("kube_node_labels", node_labels("n2", pv.name), "1x60"),
                   *_planned_capacity(pv, "n1", skip=res, value=count - 1),
                   *_planned_capacity(pv, "n2", skip=res)]  # n2: the resource is not advertised at all
    fire = {"series": fire_series, "eval": "30m", "alerts": [
        expected_alert(rule, {"node": "n1"}, count - 1), expected_alert(rule, {"node": "n2"}, 0)]}
    quiet = {"series": [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                        *_planned_capacity(pv, "n1"),
                        series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x60"),
                        *_planned_capacity(pv, "x1", skip=res, value=count + 1)],
             "eval": "30m", "alerts": []}
    return fire, quiet


def mig_cases(rf, rule, pv) -> tuple[Case, Case]:
    failed = node_labels("n1", pv.name, label_nvidia_com_mig_config_state="failed")
    fire = {"series": [series("kube_node_labels", failed, "1x60")], "eval": "30m",
            "alerts": [expected_alert(rule, failed, 1)]}
    quiet = {"series": [
        series("kube_node_labels", node_labels("n1", pv.name, label_nvidia_com_mig_config_state="success"), "1x60"),
        series("kube_node_labels", node_labels("x1", OTHER_POOL, label_nvidia_com_mig_config_state="failed"), "1x60"),
    ], "eval": "30m", "alerts": []}
    return fire, quiet


def daemonset_cases(ds: str) -> Callable:
    def cases(rf, rule, pv) -> tuple[Case, Case]:
        ns = rf.fleet.spec.cluster.gpu_operator.namespace

        def pod(node: str, ready: int) -> list[dict]:
            name = f"{ds}-{node}"
            return [series("kube_pod_info", {**KSM, "namespace": ns, "pod": name, "node": node,
                                             "created_by_kind": "DaemonSet", "created_by_name": ds}, "1x60"),
                    series("kube_pod_status_ready", {**KSM, "namespace": ns, "pod": name, "condition": "true"},
                           f"{ready}x60")]

        n1, n2 = node_labels("n1", pv.name), node_labels("n2", pv.name)
        fire = {"series": [series("kube_node_labels", n1, "1x60"), series("kube_node_labels", n2, "1x60"),
                           *pod("n2", 0)],  # n1: no pod; n2: a pod that is not ready
                "eval": "30m", "alerts": [expected_alert(rule, n1, 1), expected_alert(rule, n2, 1)]}
        quiet = {"series": [series("kube_node_labels", n1, "1x60"), *pod("n1", 1),
                            series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x60")],
                 "eval": "30m", "alerts": []}
        return fire, quiet
    return cases


def _dcgm_pair(node: str, used: int, free: int, **kw: Any) -> list[dict]:
    lab = dcgm_labels(node, **kw)
    return [series("DCGM_FI_DEV_FB_USED", lab, f"{used}x60"), series("DCGM_FI_DEV_FB_FREE", lab, f"{free}x60")]


def memory_cases(rf, rule, pv) -> tuple[Case, Case]:
    lab = dcgm_labels("n1", ns="team-a")
    fire = {"series": [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                       *_dcgm_pair("n1", 79000, 1000, ns="team-a")],
            "eval": "30m", "alerts": [expected_alert(rule, lab, 98.75)]}
    quiet = {"series": [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                        *_dcgm_pair("n1", 40000, 40000, ns="team-a"),
                        series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x60"),
                        *_dcgm_pair("x1", 79900, 100)],
             "eval": "30m", "alerts": []}
    return fire, quiet


def gauge_cases(metric: str, bad: int) -> Callable:
    def cases(rf, rule, pv) -> tuple[Case, Case]:
        lab = dcgm_labels("n1")
        fire = {"series": [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                           series(metric, lab, f"0x5 {bad}x50")],
                "eval": "10m", "alerts": [expected_alert(rule, lab, bad)]}
        quiet = {"series": [series("kube_node_labels", node_labels("n1", pv.name), "1x60"),
                            series(metric, lab, "0x60"),
                            series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x60"),
                            series(metric, dcgm_labels("x1"), f"{bad}x60")],
                 "eval": "10m", "alerts": []}
        return fire, quiet
    return cases


def xid_labels(node: str, xid: str | None, gpu: str = "0") -> dict[str, str]:
    """DCGM_EXP_XID_ERRORS_COUNT's labels: one series per XID code seen in the exporter's window,
    or one without ``xid`` (value 0) when there was none (NVIDIA/dcgm-exporter 691c927
    internal/pkg/collector/expcollector.go lines 73-105, xid_collector.go lines 68-70)."""
    out = {**dcgm_labels(node, gpu), "window_size_in_ms": "300000"}
    if xid is not None:
        out["xid"] = xid
    return out


def xid_cases(rf, rule, pv) -> tuple[Case, Case]:
    lab = xid_labels("n1", "79")
    node = series("kube_node_labels", node_labels("n1", pv.name), "1x60")
    # XID 79 in the exporter's 5-minute window from minute 5; the sticky gauge says 79 too
    fire = {"series": [node, series("DCGM_EXP_XID_ERRORS_COUNT", xid_labels("n1", None), "0x60"),
                       series("DCGM_EXP_XID_ERRORS_COUNT", lab, "_x5 1x5"),
                       series("DCGM_FI_DEV_XID_ERRORS", dcgm_labels("n1"), "0x5 79x55")],
            "eval": "10m", "alerts": [expected_alert(rule, lab, 1)]}
    quiet = {"series": [node,
                        # a tenant's XID 43 (GPU stopped processing) in the window
                        series("DCGM_EXP_XID_ERRORS_COUNT", xid_labels("n1", "43"), "_x5 2x5"),
                        # the gauge still holds an old hardware XID: not alerted on
                        series("DCGM_FI_DEV_XID_ERRORS", dcgm_labels("n1", "1"), "48x60"),
                        series("DCGM_EXP_XID_ERRORS_COUNT", xid_labels("n1", None, "1"), "0x60"),
                        # a hardware XID on another pool
                        series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x60"),
                        series("DCGM_EXP_XID_ERRORS_COUNT", xid_labels("x1", "48"), "_x5 1x5")],
             "eval": "10m", "alerts": []}
    return fire, quiet


def ecc_cases(rf, rule, pv) -> tuple[Case, Case]:
    lab = dcgm_labels("n1")
    node = series("kube_node_labels", node_labels("n1", pv.name), "1x90")
    fire = {"series": [node, series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", lab, "0x10 1x80")],
            "eval": "30m", "alerts": [expected_alert(rule, lab, 1)]}
    quiet = {"series": [node,
                        series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", lab, "3x90"),  # old errors, none new
                        series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x90"),
                        series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", dcgm_labels("x1"), "0x10 1x80")],
             "eval": "30m", "alerts": []}
    return fire, quiet


def tier_cases(rf, rule, pv) -> tuple[Case, Case]:
    tier = rf.tier_by_name[rule["labels"]["tier"]]
    granted = [ns for t in rf.fleet.spec.tenants for ns, g in t.quotas.items() if g.get(tier.name, 0) > 0]
    ns = granted[0]
    s = pv.pool.sharing
    profile = (tier.profile or "") if s.mode == "mig" and s.strategy == "mixed" else None
    prof = {"profile": profile} if profile else {}
    lab = dcgm_labels("n1", ns=ns, **prof)
    node = series("kube_node_labels", node_labels("n1", pv.name), "1x200")
    fire = {"series": [node, series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, "0.02x200")],
            "eval": "180m", "alerts": [expected_alert(rule, {"exported_namespace": ns}, 2)]}
    quiet_series = [node,
                    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", lab, "0.5x200"),
                    # idle, but a namespace the tier was not granted to
                    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels("n1", "1", ns="not-granted", **prof),
                           "0.02x200"),
                    # idle, granted namespace, but on another pool's node
                    series("kube_node_labels", node_labels("x1", OTHER_POOL), "1x200"),
                    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels("x1", ns=ns, **prof), "0.02x200"),
                    # a GPU no pod holds
                    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels("n1", "2", **prof), "0x200")]
    if profile:  # idle, granted namespace, right pool, a MIG profile no tier of the pool uses
        quiet_series.append(series("DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                                   dcgm_labels("n1", "3", ns=ns, profile="7g.80gb"), "0.02x200"))
    return fire, {"series": quiet_series, "eval": "180m", "alerts": []}


def quota_cases(rf, rule, pv) -> tuple[Case, Case]:
    tier = rf.tier_by_name[rule["labels"]["tier"]]
    grants = [(ns, g[tier.name]) for t in rf.fleet.spec.tenants for ns, g in t.quotas.items()
              if g.get(tier.name, 0) > 0]
    ns, units = grants[0]
    res = quota_key(rf.tier_resource(tier))
    q = {**KSM, "namespace": ns, "resourcequota": quota_object(rf, tier), "resource": res}

    def quota(used: int, labels: dict = q) -> list[dict]:
        return [series("kube_resourcequota", {**labels, "type": "hard"}, f"{units}x60"),
                series("kube_resourcequota", {**labels, "type": "used"}, f"{used}x60")]

    # other tiers of this pool whose quota is the same object and resource in that namespace
    # (tiers without enforcePriority share gpuplan-gpus) fire on the same series
    sharing = [r for r in POOL_RULES[pv.name] if r["alert"] == rule["alert"]
               and (t := rf.tier_by_name[r["labels"]["tier"]]) is not None
               and quota_object(rf, t) == quota_object(rf, tier) and quota_key(rf.tier_resource(t)) == res
               and any(g.get(t.name, 0) > 0 for tn in rf.fleet.spec.tenants for n, g in tn.quotas.items() if n == ns)]
    assert rule in sharing
    fire = {"series": quota(units), "eval": "60m",
            "alerts": [expected_alert(r, q, 100) for r in sharing]}  # ignoring(type) drops `type`
    quiet = {"series": [*quota(units // 2),
                        *quota(units, {**q, "namespace": "someone-else"}),
                        *quota(units, {**q, "resource": "requests.example.com/other"}),
                        *quota(units, {**q, "resourcequota": "not-gpuplans"})],
             "eval": "60m", "alerts": []}
    return fire, quiet


POOL_RULES: dict[str, list[dict]] = {}


POOL_CASES: dict[str, Callable] = {
    "GPUNodeCapacityOffPlan": capacity_cases,
    "MIGConfigFailed": mig_cases,
    "GPUDevicePluginNotReady": daemonset_cases("nvidia-device-plugin-daemonset"),
    "DCGMExporterNotReady": daemonset_cases("nvidia-dcgm-exporter"),
    "GPUMemoryNearlyFull": memory_cases,
    "GPUXidError": xid_cases,
    "GPURowRemapFailure": gauge_cases("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1),
    "GPUUncorrectableECCError": ecc_cases,
    "GPUTierUnderused": tier_cases,
    "GPUQuotaNearlyExhausted": quota_cases,
}


def unit_tests(rf: ResolvedFleet, path: str, prom_rule: dict) -> list[dict]:
    rules = [r for g in prom_rule["spec"]["groups"] for r in g["rules"]]
    tests = []
    seen: set[str] = set()

    def add(rule: dict, case: Case, kind: str) -> None:
        alerts = case["alerts"]
        tests.append({"name": f"{rule['alert']} {kind} {rule['labels']}", "interval": T,
                      "input_series": case["series"],
                      "alert_rule_test": [{"eval_time": case["eval"], "alertname": rule["alert"],
                                           "exp_alerts": alerts}]})
        seen.add(f"{rule['alert']}:{kind}")

    pv = rf.pool_by_name[prom_rule["metadata"]["labels"]["gpuplan.dev/pool"]]
    POOL_RULES[pv.name] = rules
    for rule in rules:
        fire, quiet = POOL_CASES[rule["alert"]](rf, rule, pv)
        add(rule, fire, "fires")
        add(rule, quiet, "quiet")
    return tests


@pytest.mark.slow
def test_promtool_unit_tests_fire_and_stay_quiet(compiled, tmp_path):
    rf = compiled.resolved
    files = rule_files(compiled)
    covered: set[str] = set()
    for path, prom_rule in sorted(files.items()):
        rule_file = write_rule_file(tmp_path / Path(path).name, prom_rule)
        tests = unit_tests(rf, path, prom_rule)
        n_rules = sum(len(g["rules"]) for g in prom_rule["spec"]["groups"])
        assert len(tests) == 2 * n_rules, path
        test_file = tmp_path / f"test-{Path(path).name}"
        test_file.write_text(yaml.safe_dump({"rule_files": [rule_file.name], "evaluation_interval": T,
                                             "tests": tests}, sort_keys=False), encoding="utf-8")
        r = run_promtool("test", "rules", test_file.name, cwd=tmp_path)
        assert r.returncode == 0, f"{path}:\n{r.stdout}\n{r.stderr}"
        covered |= {t["alert_rule_test"][0]["alertname"] for t in tests}
    assert covered == set(ALERTS) - {"GPUNodeRegistrationTimeout"}  # tested in test_boot_mig_alerts.py


def test_promtool_unit_tests_are_live(compiled, tmp_path):
    """A case that expects the wrong thing fails: the harness really compares."""
    rf = compiled.resolved
    path, prom_rule = next((p, d) for p, d in sorted(rule_files(compiled).items()) if "pool-" in p)
    write_rule_file(tmp_path / "r.yaml", prom_rule)
    tests = unit_tests(rf, path, prom_rule)
    fire = next(t for t in tests if " fires " in t["name"])
    fire["alert_rule_test"][0]["exp_alerts"] = []
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"rule_files": ["r.yaml"], "tests": [fire]}))
    assert run_promtool("test", "rules", "t.yaml", cwd=tmp_path).returncode != 0
