"""Messages name the field, say why, and point at the spec's own words."""

from __future__ import annotations

import pytest

from tests.rules.helpers import BASE, edit, position


def _errors(tmp_path, text):
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    return [d for d in check_fleet(p).diagnostics if d.is_error]


TRAIN = "    - name: train\n      gpu: A100-SXM4-80GB\n"


def test_list_error_names_the_field_not_the_index(tmp_path):
    text = edit(BASE, TRAIN, TRAIN + "      taints: [{key: a, effect: NoSchedul}]\n")
    (d,) = _errors(tmp_path, text)
    assert d.message == "invalid value 'NoSchedul' for effect" and d.hint == "did you mean 'NoSchedule'?"
    text = BASE.replace("    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                        "    - name: train\n      gpu: A100-SXM4-80GB\n"
                        "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, capacityTypes: [on-demand, Spot]}\n")
    (d,) = _errors(tmp_path, text)
    assert d.message == "invalid value 'Spot' for capacityTypes[1]" and d.hint == "did you mean 'spot'?"
    assert (d.line, d.col) == position(text, "Spot")


@pytest.mark.parametrize("where,key,hint", [
    ("pool", "topologyManagerPolicy", "did you mean 'topology.policy'?"),
    ("pool", "topology-manager-scope", "did you mean 'topology.scope'?"),
    ("topology", "topologyManagerPolicy", "did you mean 'policy'?"),
    ("group", "mig-devices", "did you mean 'layout'?"),
])
def test_did_you_mean_points_at_the_spec_field(tmp_path, where, key, hint):
    if where == "pool":
        text = edit(BASE, TRAIN, TRAIN + f"      {key}: restricted\n")
    elif where == "topology":
        text = edit(BASE, TRAIN, TRAIN + f"      topology: {{{key}: restricted}}\n")
    else:
        text = edit(BASE, "layout: {1g.10gb: 7}}",
                    f"devices: [{{devices: [0, 1, 2, 3], {key}: {{1g.10gb: 7}}}}]}}")
    (d,) = _errors(tmp_path, text)
    assert d.code == "GP101" and d.hint == hint
    assert (d.line, d.col) == position(text, key)


def test_ordinary_misspelling_still_uses_difflib(tmp_path):
    text = edit(BASE, "replicas: 4}", "replica: 4}")
    (d,) = _errors(tmp_path, text)
    assert d.code == "GP101" and d.hint == "did you mean 'replicas'?"


@pytest.mark.parametrize("tier,hint", [
    ("traning", "did you mean 'training'?"),
    ("gpu-jobs", "define tier 'gpu-jobs' under spec.tiers (defined: training, serve, notebooks)"),
])
def test_quota_for_an_undefined_tier(tmp_path, tier, hint):
    text = edit(BASE, "training: 8,", f"{tier}: 8,")
    (d,) = _errors(tmp_path, text)
    assert d.code == "GP107" and d.hint == hint


def test_quota_without_any_tier(tmp_path):
    text = BASE.split("  tiers:\n")[0] + "  tenants:\n    - {name: a, namespaces: [a], quotas: {a: {t: 1}}}\n"
    (d,) = _errors(tmp_path, text)
    assert d.code == "GP107" and d.hint == "define tier 't' under spec.tiers"


def test_range_error_says_why(tmp_path):
    text = edit(BASE, "priority: 1000}", "priority: 1000000001}")
    (d,) = _errors(tmp_path, text)
    assert d.message == ("spec.tiers[0].priority must be at most 1,000,000,000 (got 1,000,000,001): "
                         "PriorityClass values above 1,000,000,000 are reserved for system classes "
                         "(system-cluster-critical, system-node-critical) and the API server refuses them; "
                         "the value is an int32")
    assert d.hint == "use a value at most 1,000,000,000"


def test_snake_case_keys_are_refused_as_the_schema_refuses_them(tmp_path):
    """fleet.yaml's keys are the JSON Schema's (camelCase): a Python field name is an unknown key,
    and the hint names the key the schema takes, also for a field pydantic defers
    (`capacityReservations`, a forward reference)."""
    text = BASE.replace("    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                        "    - name: train\n      gpu: A100-SXM4-80GB\n"
                        "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16,"
                        " capacity_types: [on-demand]}\n")
    errors = _errors(tmp_path, text)
    snake = [d for d in errors if "capacity_types" in d.message]
    assert [d.code for d in snake] == ["GP101"] and snake[0].hint == "did you mean 'capacityTypes'?"
    assert (snake[0].line, snake[0].col) == position(text, "capacity_types")
    near = edit(BASE, "    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                "    - name: train\n      gpu: A100-SXM4-80GB\n"
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, capacityReservation: []}\n")
    (d,) = _errors(tmp_path, near)
    assert d.code == "GP101" and d.hint == "did you mean 'capacityReservations'?"
