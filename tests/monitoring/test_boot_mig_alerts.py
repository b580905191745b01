"""Karpenter AL2023 MIG pools (MIG at boot): no MIGConfigFailed (its label is preset to
``success``), and GPUNodeRegistrationTimeout on Karpenter's registration timeouts, run by the
real promtool."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuplan.identity import boot_mig
from gpuplan.lower.karpenter import nodepool_names
from tests.monitoring.promkit import expected_alert, run_promtool, series, write_rule_file
from tests.outputkit import REPO, compile_ok, docs

KARPENTER = {"job": "karpenter", "namespace": "kube-system"}
METRIC = "karpenter_nodeclaims_disrupted_total"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    src = REPO / "examples" / "aws-burst.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["spec"]["monitoring"] = {"release": "kube-prometheus-stack"}
    variant = tmp_path_factory.mktemp("v") / src.name  # the examples read no file beside them
    variant.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return compile_ok(variant)


def pool_rules(compiled, pool: str) -> tuple[dict, list[dict]]:
    [d] = docs(compiled.files[f"monitoring/rules/pool-{pool}.yaml"])
    return d, [r for g in d["spec"]["groups"] for r in g["rules"]]


def boot_pools(compiled) -> list:
    out = [pv for pv in compiled.resolved.pools if boot_mig(pv)]
    assert out, "the example has a Karpenter AL2023 MIG pool"
    return out


def test_boot_mig_pools_alert_on_registration_timeouts_not_on_mig_state(compiled):
    for pv in boot_pools(compiled):
        _, rules = pool_rules(compiled, pv.name)
        alerts = {r["alert"] for r in rules}
        assert "GPUNodeRegistrationTimeout" in alerts
        assert "MIGConfigFailed" not in alerts
    for pv in compiled.resolved.pools:
        if not boot_mig(pv):
            assert "GPUNodeRegistrationTimeout" not in {r["alert"] for r in pool_rules(compiled, pv.name)[1]}
    runbook = compiled.files["monitoring/RUNBOOK.md"].decode()
    assert "## GPUNodeRegistrationTimeout" in runbook


def test_registration_timeout_fires_and_stays_quiet(compiled, tmp_path):
    pv = boot_pools(compiled)[0]
    prom_rule, rules = pool_rules(compiled, pv.name)
    [rule] = [r for r in rules if r["alert"] == "GPUNodeRegistrationTimeout"]
    write_rule_file(tmp_path / "r.yaml", prom_rule)
    np = nodepool_names(pv)[0]

    def labels(nodepool: str, reason: str) -> dict[str, str]:
        return {**KARPENTER, "nodepool": nodepool, "reason": reason, "capacity_type": "on-demand"}

    fire = [series(METRIC, labels(np, "registration_timeout"), "0 0 0 1 1 1 2 2 2 2")]
    quiet = [series(METRIC, labels(np, "registration_timeout"), "3x10"),  # old timeouts, none now
             series(METRIC, labels(np, "launch_timeout"), "0 1 2 3 4 5 6 7 8 9"),
             series(METRIC, labels("not-this-pool", "registration_timeout"), "0 1 2 3 4 5 6 7 8 9")]
    # two timeouts within the rule's hour (the counter's samples all inside the window)
    tests = [
        {"name": "fires", "interval": "1m", "input_series": fire,
         "alert_rule_test": [{"eval_time": "9m", "alertname": rule["alert"],
                              "exp_alerts": [expected_alert(rule, {"nodepool": np}, 2)]}]},
        {"name": "quiet", "interval": "1m", "input_series": quiet,
         "alert_rule_test": [{"eval_time": "9m", "alertname": rule["alert"], "exp_alerts": []}]},
    ]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"rule_files": ["r.yaml"], "tests": tests}), encoding="utf-8")
    r = run_promtool("test", "rules", "t.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_platform_mig_pools_get_no_mig_manager_alert(tmp_path):
    """A GKE node pool partitions its GPUs itself (gpuPartitionSize) and runs no mig-manager:
    nothing sets nvidia.com/mig.config.state there, so MIGConfigFailed could never fire."""
    from gpuplan.provisioning.pools import platform_gpu_stack

    src = REPO / "examples" / "gke.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["spec"]["monitoring"] = {"release": "kube-prometheus-stack"}
    variant = tmp_path / src.name
    variant.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    c = compile_ok(variant)
    mig = [pv for pv in c.resolved.pools if pv.pool.sharing.mode == "mig" and platform_gpu_stack(pv.pool)]
    assert mig
    for pv in mig:
        assert "MIGConfigFailed" not in {r["alert"] for r in pool_rules(c, pv.name)[1]}
    assert "partitions the GPUs itself" in c.files["monitoring/RUNBOOK.md"].decode()
