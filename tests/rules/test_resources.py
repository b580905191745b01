"""GP401-GP406: tiers hand out resources their pools advertise."""

from tests.rules.helpers import BASE, edit, only, position

SERVE = "{name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000}"


def test_gp401_mixed_tier_without_profile(run):
    text = edit(BASE, SERVE, "{name: serve, pool: infer, workload: inference, priority: 5000}")
    d = only(run(text), "GP401")
    assert (d.line, d.col) == position(text, "serve, pool: infer")
    assert "1g.10gb" in d.hint


def test_gp402_profile_not_in_layout(run):
    text = edit(BASE, SERVE, "{name: serve, pool: infer, profile: 3g.40gb, workload: inference, priority: 5000}")
    d = only(run(text), "GP402")
    assert (d.line, d.col) == position(text, "3g.40gb, workload")
    assert "nvidia.com/mig-3g.40gb is never advertised" in d.message


def test_gp403_single_strategy_profile_mismatch(run):
    text = edit(BASE, "strategy: mixed, layout: {1g.10gb: 7}", "strategy: single, layout: {1g.10gb: 7}")
    codes = run.codes(text, "GP40")
    assert "GP403" not in codes  # 1g.10gb is the pool's one profile
    assert codes == ["GP405"]  # single turns the slices back into nvidia.com/gpu, like pool train
    text = edit(text, SERVE, "{name: serve, pool: infer, profile: 2g.20gb, workload: inference, priority: 5000}")
    d = only(run(text), "GP403")
    assert (d.line, d.col) == position(text, "2g.20gb, workload")
    assert d.hint == "use profile 1g.10gb"


def test_gp404_profile_on_non_mig_pool(run):
    text = edit(BASE, "{name: notebooks, pool: dev,", "{name: notebooks, pool: dev, profile: 1g.10gb,")
    d = only(run(text), "GP404")
    assert (d.line, d.col) == position(text, "1g.10gb, workload: interactive")
    assert "time-slicing" in d.message


def test_gp405_two_exclusive_pools_share_nvidia_com_gpu(run):
    text = edit(BASE, "      sharing: {mode: time-slicing, replicas: 4}\n", "      sharing: {mode: exclusive}\n")
    d = only(run(text), "GP405")
    assert (d.line, d.col) == position(text, "dev, workload: interactive")
    assert "nvidia.com/gpu" in d.message and "training" in d.message
    # scoped to their PriorityClasses, the quotas can be told apart
    scoped = edit(text, "workload: training, priority: 1000}", "workload: training, priority: 1000, enforcePriority: true}")
    scoped = edit(scoped, "priority: 10, preemption: Never}", "priority: 10, preemption: Never, enforcePriority: true}")
    assert "GP405" not in run.codes(scoped)


def test_gp405_unrenamed_time_slicing_next_to_exclusive(run):
    text = edit(BASE, "replicas: 4}", "replicas: 4, renameByDefault: false}")
    d = only(run(text), "GP405")
    assert "renameByDefault: true" in d.hint


def test_gp406_compute_instance_profile_gets_no_resource(run):
    text = edit(BASE, "layout: {1g.10gb: 7}", "layout: {1c.2g.20gb: 1, 2g.20gb: 1, 1g.10gb: 3}")
    text = edit(text, SERVE, "{name: serve, pool: infer, profile: 1c.2g.20gb, workload: inference, priority: 5000}")
    d = only(run(text), "GP406")
    assert (d.line, d.col) == position(text, "1c.2g.20gb, workload")
