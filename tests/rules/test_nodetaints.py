"""GP986: a static pool's NoExecute taint (applied by nfd-master to running nodes) is refused at
the spec line; NoSchedule, and NoExecute on autoscaled pools, pass."""

from tests.rules.helpers import BASE, edit, only, position

TAINTED = "      sharing: {mode: exclusive}\n"


def with_taint(effect: str) -> str:
    return edit(BASE, TAINTED, TAINTED + f"      taints:\n        - {{key: example.com/gpu, value: \"yes\", effect: {effect}}}\n")


def test_gp986_no_execute_on_a_static_pool(run):
    text = with_taint("NoExecute")
    d = only(run(text), "GP986")
    assert (d.line, d.col) == position(text, "NoExecute")
    assert d.is_error and d.hint and "NoSchedule" in d.hint
    assert "train" in d.message


def test_gp986_no_schedule_passes(run):
    assert "GP986" not in run.codes(with_taint("NoSchedule"))
    assert "GP986" not in run.codes(with_taint("PreferNoSchedule"))


def test_gp986_not_on_an_autoscaled_pool(tmp_path):
    """A Karpenter pool's NodePool taints a node when it is created, before any pod runs there."""
    from pathlib import Path

    import yaml

    from gpuplan.compiler import check_fleet

    src = Path(__file__).resolve().parents[2] / "examples" / "aws-burst.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    [pool] = [p for p in data["spec"]["pools"] if "karpenter" in p][:1]
    pool["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}]
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    checked = check_fleet(p)
    assert not [d for d in checked.diagnostics if d.is_error], checked.diagnostics  # the rules ran
    assert "GP986" not in {d.code for d in checked.diagnostics}
    # the same taint on a static pool of the same spec is refused
    data["spec"]["pools"].append({"name": "static-x", "gpu": "A100-SXM4-80GB", "gpusPerNode": 8, "nodes": ["s1"],
                                  "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]})
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert "GP986" in {d.code for d in check_fleet(p).diagnostics}
