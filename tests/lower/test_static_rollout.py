"""A static pool's MIG layout or sharing change reaches its nodes a step at a time
(gpuplan.provisioning.rollout): each test builds a tree, changes the spec and builds again over
that tree, as `gpuplan build` does, and reads which node the pool's NodeFeatureRule gives which
labels, and which configs the ConfigMaps still carry for the nodes it holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.outputkit import docs, one
from tests.report.helpers import SCENARIO

from gpuplan.compiler import Options, compile_fleet
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL
from gpuplan.output.tree import write_tree
from gpuplan.provisioning.rollout import OldRule, batch_size, plan, target_rule_name
from gpuplan.report.disruption import by_pool, disruptions

RULE = "pools/{}/node-labels.yaml"
MIG_CM = "gpu-operator/mig-parted-config.yaml"
PLUGIN_CM = "gpu-operator/device-plugin-config.yaml"

# three MIG nodes, so that a rollout has a first, a middle and a last step
THREE = SCENARIO.replace("nodes: [gpu-05, gpu-06]", "nodes: [gpu-05, gpu-06, gpu-09]")
OLD_LAYOUT = "layout: {3g.40gb: 2}"
NEW_LAYOUT = "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}"


def _build(tmp_path: Path, text: str, *, advance: frozenset[str] = frozenset()):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    c = compile_fleet(spec, out_dir=tmp_path / "generated", options=Options(advance=advance))
    assert c.files, c.diagnostics
    write_tree(tmp_path / "generated", c.files, force=True)
    return c


def _rules(c, pool: str) -> list[tuple[str, str | None, str | None, list[str]]]:
    """(rule name, mig.config, device-plugin.config, nodes) of the pool's NodeFeatureRule."""
    (nfr,) = [d for d in docs(c.files[RULE.format(pool)]) if d["kind"] == "NodeFeatureRule"]
    return [(r["name"], r["labels"].get(MIG_CONFIG_LABEL), r["labels"].get(DEVICE_PLUGIN_CONFIG_LABEL),
             r["matchFeatures"][0]["matchExpressions"]["nodename"]["value"]) for r in nfr["spec"]["rules"]]


def _mig_configs(c) -> set[str]:
    return set(yaml.safe_load(one(c, MIG_CM)["data"]["config.yaml"])["mig-configs"])


def test_a_mig_layout_change_moves_one_node_per_step(tmp_path):
    before = _build(tmp_path, THREE)
    [(_, old_mig, _, nodes)] = _rules(before, "infer")
    assert nodes == ["gpu-05", "gpu-06", "gpu-09"]
    changed = THREE.replace(OLD_LAYOUT, NEW_LAYOUT)

    first = _build(tmp_path, changed)
    (name, new_mig, _, now), (held_name, held_mig, _, held) = _rules(first, "infer")
    assert name == target_rule_name("infer") and new_mig != old_mig
    assert now == ["gpu-05"] and held == ["gpu-06", "gpu-09"] and held_mig == old_mig
    # the layout the held nodes carry stays in the mig-parted ConfigMap, with its old body
    assert {old_mig, new_mig} <= _mig_configs(first)
    assert (yaml.safe_load(one(first, MIG_CM)["data"]["config.yaml"])["mig-configs"][old_mig]
            == yaml.safe_load(one(before, MIG_CM)["data"]["config.yaml"])["mig-configs"][old_mig])

    # building the same spec again moves nothing: `gpuplan check` agrees with the build
    again = _build(tmp_path, changed)
    assert again.files == first.files

    second = _build(tmp_path, changed, advance=frozenset({"infer"}))
    assert [r[3] for r in _rules(second, "infer")] == [["gpu-05", "gpu-06"], ["gpu-09"]]
    last = _build(tmp_path, changed, advance=frozenset({"infer"}))
    assert _rules(last, "infer") == [(target_rule_name("infer"), new_mig, _rules(last, "infer")[0][2],
                                      ["gpu-05", "gpu-06", "gpu-09"])]
    # one more advance moves nothing, and says so
    extra = _build(tmp_path, changed, advance=frozenset({"infer"}))
    assert [d.code for d in extra.diagnostics if d.code == "GP992"] == ["GP992"]
    assert extra.files == last.files


def test_a_sharing_change_rolls_and_keeps_the_held_nodes_config(tmp_path):
    before = _build(tmp_path, SCENARIO)
    [(_, _, old_cfg, _)] = _rules(before, "dev")
    after = _build(tmp_path, SCENARIO.replace("replicas: 2}", "replicas: 4}"))
    (_, _, new_cfg, now), (_, _, held_cfg, held) = _rules(after, "dev")
    assert (now, held, held_cfg) == (["gpu-07"], ["gpu-08"], old_cfg) and new_cfg != old_cfg
    assert one(after, PLUGIN_CM)["data"][old_cfg] == one(before, PLUGIN_CM)["data"][old_cfg]
    # other pools are untouched
    assert len(_rules(after, "infer")) == 1 and len(_rules(after, "train")) == 1


@pytest.mark.parametrize("setting, steps", [("100%", [3]), ("2", [2, 1]), ("50%", [2, 1])])
def test_max_unavailable_sets_the_step(tmp_path, setting, steps):
    text = THREE.replace("sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}",
                         f"sharing: {{mode: mig, strategy: mixed, layout: {{3g.40gb: 2}}}}\n"
                         f"      rollout: {{maxUnavailable: {setting}}}")
    assert text != THREE
    _build(tmp_path, text)
    changed = text.replace(OLD_LAYOUT, NEW_LAYOUT)
    seen, done = [], 0
    c = _build(tmp_path, changed)
    while True:
        at_target = len(_rules(c, "infer")[0][3])
        seen.append(at_target - done)
        done = at_target
        if len(_rules(c, "infer")) == 1:
            break
        c = _build(tmp_path, changed, advance=frozenset({"infer"}))
    assert seen == steps


def test_a_change_during_a_rollout_starts_again_from_where_the_nodes_stand(tmp_path):
    _build(tmp_path, THREE)
    first = _build(tmp_path, THREE.replace(OLD_LAYOUT, NEW_LAYOUT))
    old_mig = _rules(first, "infer")[1][1]
    mid_mig = _rules(first, "infer")[0][1]
    third = _build(tmp_path, THREE.replace(OLD_LAYOUT, "layout: {3g.40gb: 1, 1g.10gb: 3}"))
    rules = _rules(third, "infer")
    # gpu-05 takes the newest layout, the others stay at the layout they run: nothing moves twice
    assert rules[0][3] == ["gpu-05"] and rules[0][1] not in (old_mig, mid_mig)
    assert [(r[1], r[3]) for r in rules[1:]] == [(old_mig, ["gpu-06", "gpu-09"])]
    assert {old_mig, mid_mig} <= _mig_configs(third)


def test_a_node_new_to_the_pool_takes_the_pools_labels_at_once(tmp_path):
    _build(tmp_path, SCENARIO)
    grown = SCENARIO.replace("nodes: [gpu-07, gpu-08]", "nodes: [gpu-07, gpu-08, gpu-10]").replace(
        "replicas: 2}", "replicas: 4}")
    (_, _, _, now), (_, _, _, held) = _rules(_build(tmp_path, grown), "dev")
    assert now == ["gpu-07", "gpu-10"] and held == ["gpu-08"]


def test_a_hand_edited_held_rule_cannot_hold_a_node_at_a_config_that_is_gone(tmp_path):
    _build(tmp_path, SCENARIO)
    _build(tmp_path, SCENARIO.replace("replicas: 2}", "replicas: 4}"))
    path = tmp_path / "generated" / RULE.format("dev")
    text = path.read_text(encoding="utf-8")
    held_cfg = text.split("held 1")[1].split("device-plugin.config: ")[1].split("\n")[0]
    assert held_cfg.startswith("dev-") and held_cfg != "dev-00000000"
    # a config name of the right shape that no ConfigMap carries
    path.write_text(text.replace(f"device-plugin.config: {held_cfg}", "device-plugin.config: dev-00000000"),
                    encoding="utf-8")
    c = _build(tmp_path, SCENARIO.replace("replicas: 2}", "replicas: 4}"))
    assert [r[3] for r in _rules(c, "dev")] == [["gpu-07", "gpu-08"]]


def test_the_change_report_names_the_step_and_the_next(tmp_path):
    old = _build(tmp_path, THREE)
    new = _build(tmp_path, THREE.replace(OLD_LAYOUT, NEW_LAYOUT))
    ds = disruptions(old.files, new.files)
    drains = [d.subject for d in ds if d.severity == "drain"]
    assert drains == ["node gpu-05 (pool infer)"]
    [step] = [d for d in ds if d.subject == "pool infer rollout"]
    assert step.severity == "hand-step" and "--advance infer" in step.message
    assert "gpu-06, gpu-09" in step.message and "nvidia.com/mig.config.state=success" in step.message
    assert any(line.startswith("pool infer: 1 node drained, 2 held") for line in by_pool(ds))


def test_rollout_on_an_autoscaled_pool_is_refused(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
    marker = "      karpenter:\n"
    assert marker in text
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text.replace(marker, "      rollout: {maxUnavailable: 1}\n" + marker, 1), encoding="utf-8")
    c = compile_fleet(spec, out_dir=tmp_path / "generated")
    [d] = [d for d in c.diagnostics if d.code == "GP993"]
    assert d.line == spec.read_text(encoding="utf-8").splitlines().index("      rollout: {maxUnavailable: 1}") + 1
    assert not c.files


@pytest.mark.parametrize("value, nodes, step", [(1, 5, 1), (3, 5, 3), ("10%", 5, 1), ("50%", 5, 3), ("100%", 5, 5)])
def test_batch_size_rounds_a_percentage_up(value, nodes, step):
    assert batch_size(value, nodes) == step


def test_the_plan_holds_only_values_that_exist():
    rules = (OldRule(target_rule_name("p"), {"k": "a"}, ("n1", "n2")),)
    valid = {"k": frozenset({"a", "b"})}
    step = plan("p", ("n1", "n2"), {"k": "b"}, ("k",), rules, 1, False, valid)
    assert (step.target, step.held_nodes, step.moved) == (("n1",), ("n2",), ("n1",))
    # the value the old tree gives is not one the new tree carries: nothing to hold
    step = plan("p", ("n1", "n2"), {"k": "b"}, ("k",), rules, 1, False, {"k": frozenset({"b"})})
    assert (step.target, step.held) == (("n1", "n2"), ())
    # no previous tree: every node at once
    assert plan("p", ("n1", "n2"), {"k": "b"}, ("k",), (), 1, False, valid).target == ("n1", "n2")
