"""GP301-GP305: time-slicing and MPS."""

from tests.rules.helpers import BASE, edit, only, position

TS = "sharing: {mode: time-slicing, replicas: 4}"


def test_base_is_clean(run):
    assert run(BASE) == []


def test_gp301_replicas_one(run):
    text = edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 1}")
    d = only(run(text), "GP301")
    assert (d.line, d.col) == position(text, "1}", 0)
    assert "replicas 1" in d.message and d.hint and "exclusive" in d.hint
    assert d.severity.value == "error"


def test_gp301_mps_replicas_one(run):
    text = edit(BASE, TS, "sharing: {mode: mps, replicas: 1}")
    d = only(run(text), "GP301")
    assert (d.line, d.col) == position(text, "replicas: 1", len("replicas: "))


def test_gp302_mps_above_48(run):
    text = edit(BASE, TS, "sharing: {mode: mps, replicas: 64}")
    d = only(run(text), "GP302")
    assert (d.line, d.col) == position(text, "64}")
    assert "at most 48" in d.message
    assert run(edit(BASE, TS, "sharing: {mode: mps, replicas: 48}")) == []


def test_gp302_mps_old_gpu_limit_16(run):
    text = edit(BASE, "      sharing: {mode: time-slicing, replicas: 4}",
                "      sharing: {mode: mps, replicas: 20}")
    text = text.replace("name: dev\n      gpu: A100-SXM4-80GB", "name: dev\n      gpu: V100-SXM2-16GB")
    d = only(run(text), "GP302")
    assert "at most 16" in d.message and "compute capability 7.0" in d.message
    assert (d.line, d.col) == position(text, "20}")


def test_gp303_not_renamed(run):
    text = edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}")
    d = only(run(text), "GP303")
    assert (d.line, d.col) == position(text, "false}")
    assert d.severity.value == "warning" and "renameByDefault: true" in d.hint


def test_gp304_fail_requests_greater_than_one(run):
    text = edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 4, failRequestsGreaterThanOne: false}")
    d = only(run(text), "GP304")
    assert (d.line, d.col) == position(text, "false}")
    assert "two slices of one" in d.message


def test_gp305_inference_on_heavily_shared_pool(run):
    text = edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 8}")
    text = edit(text, "{name: notebooks, pool: dev, workload: interactive",
                "{name: notebooks, pool: dev, workload: inference")
    d = only(run(text), "GP305")
    assert (d.line, d.col) == position(text, "pool: dev, workload: inference", len("pool: "))
    # 4 replicas is the limit, and interactive tiers are fine with 8
    assert "GP305" not in run.codes(edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 8}"))
    text4 = edit(BASE, "{name: notebooks, pool: dev, workload: interactive", "{name: notebooks, pool: dev, workload: inference")
    assert "GP305" not in run.codes(text4)


def test_mig_on_non_mig_gpu_is_reported_once(run):
    """MIG on a GPU without MIG is GP206 (MIG rules); sharing must not report it again."""
    text = edit(BASE, "name: infer\n      gpu: A100-SXM4-80GB", "name: infer\n      gpu: L4")
    codes = run.codes(text)
    assert codes.count("GP206") == 1
    assert not [c for c in codes if c.startswith("GP3")]


def test_disable_with_reason(run):
    text = edit(BASE, TS, "sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}")
    assert "GP303" in run.codes(text)
    text += "  rules:\n    disable:\n      - {code: GP303, reason: legacy notebooks request nvidia.com/gpu}\n"
    assert "GP303" not in run.codes(text)
