"""GP410-GP412: quotas against capacity."""

from tests.rules.helpers import BASE, edit, only, position

QUOTA = "alpha-ns: {training: 8, serve: 8, notebooks: 16}"


def test_gp410_time_sliced_quota_above_replicas(run):
    # pool dev: 1 node × 4 GPUs × 4 replicas = 16 nvidia.com/gpu.shared
    text = edit(BASE, QUOTA, "alpha-ns: {training: 8, serve: 8, notebooks: 20}")
    d = only(run(text), "GP410")
    assert d.message == ("quota 20 nvidia.com/gpu.shared on tier notebooks exceeds capacity 16 "
                         "(1 node × 4 GPUs × 4 replicas); oversubscribed 1.25×")
    # at the quota cell that makes it, not at the tier
    assert (d.line, d.col) == position(text, "20}")
    assert "alpha 20" in d.hint and "maxOversubscription: 1.25" in d.hint


def test_gp410_brief_example_two_nodes(run):
    # 2 nodes × 4 GPUs × 4 replicas = 32; 40 granted over two tenants
    text = edit(BASE, "nodes: [n4]", "nodes: [n4, n5]")
    text = edit(text, QUOTA, "alpha-ns: {training: 8, serve: 8, notebooks: 24}")
    text += "    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {notebooks: 16}\n"
    d = only(run(text), "GP410")
    assert d.message.startswith("quota 40 nvidia.com/gpu.shared on tier notebooks exceeds capacity 32 "
                                "(2 nodes × 4 GPUs × 4 replicas)")
    assert d.hint.startswith("granted: alpha 24, beta 16.")
    assert (d.line, d.col) == position(text, "24}"), "at the largest grant"


def test_gp410_allowed_by_max_oversubscription(run):
    text = edit(BASE, QUOTA, "alpha-ns: {training: 8, serve: 8, notebooks: 20}")
    ok = edit(text, "preemption: Never}", "preemption: Never, maxOversubscription: 1.25}")
    assert "GP410" not in run.codes(ok)
    tight = edit(text, "preemption: Never}", "preemption: Never, maxOversubscription: 1.2}")
    d = only(run(tight), "GP410")
    assert "× maxOversubscription 1.2 = 19.2" in d.message
    assert (d.line, d.col) == position(tight, "1.2}")


def test_gp410_exclusive_and_mig(run):
    # train: 2 nodes × 4 GPUs = 8; infer: 1 node × 7 × 1g.10gb = 7 per node... × 4 GPUs = 28
    text = edit(BASE, QUOTA, "alpha-ns: {training: 9, serve: 29, notebooks: 16}")
    diags = [d for d in run(text) if d.code == "GP410"]
    msgs = sorted(d.message for d in diags)
    assert msgs == [
        "quota 29 nvidia.com/mig-1g.10gb on tier serve exceeds capacity 28 (1 node × 28 per node); "
        "oversubscribed 1.04×",
        "quota 9 nvidia.com/gpu on tier training exceeds capacity 8 (2 nodes × 4 GPUs); oversubscribed 1.12×",
    ]


def test_gp410_strictest_limit_of_tiers_on_one_resource(run):
    text = edit(BASE, "    - {name: notebooks,",
                "    - {name: training-low, pool: train, workload: batch, priority: 1, preemption: Never,"
                " maxOversubscription: 2.0}\n    - {name: notebooks,")
    ok = edit(text, QUOTA, "alpha-ns: {training: 4, training-low: 4, serve: 8, notebooks: 16}")
    assert "GP410" not in run.codes(ok)
    over = edit(text, QUOTA, "alpha-ns: {training: 4, training-low: 8, serve: 8, notebooks: 16}")
    d = only(run(over), "GP410")
    assert d.message.startswith("quota 12 nvidia.com/gpu on tiers training, training-low (pool train) "
                                "exceeds capacity 8")


def test_gp410_karpenter_counts_at_max_gpus(run):
    text = edit(BASE, "      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16}\n")
    ok = edit(text, QUOTA, "alpha-ns: {training: 16, serve: 8, notebooks: 16}")
    assert "GP410" not in run.codes(ok)
    d = only(run(edit(text, QUOTA, "alpha-ns: {training: 17, serve: 8, notebooks: 16}")), "GP410")
    assert "capacity 16 (2 nodes (Karpenter maxGPUs 16) × 8 GPUs)" in d.message


def test_gp411_quota_on_pool_without_capacity(run):
    # one p4de.24xlarge has 8 GPUs; maxGPUs 4 allows no node at all
    text = edit(BASE, "      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 4}\n")
    d = only(run(text), "GP411")
    assert (d.line, d.col) == position(text, "training: 8", len("training: "))
    assert "advertises none" in d.message


def test_gp412_capacity_no_tier_offers(run):
    text = edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 1, 1g.10gb: 4}")
    d = only(run(text), "GP412")
    # four 3g.40gb slices of an A100 80GB (4 of its 8 memory slices each) = 2 GPUs at 2.0/h for 730 h
    assert d.message == ("pool 'infer' advertises 4 nvidia.com/mig-3g.40gb that no tier hands out "
                         "(2 GPU-eq, 2,920.00 a month): paid for and grantable by no one")
    assert (d.line, d.col) == position(text, "infer\n")
    assert d.severity.value == "warning"


def test_stranded_capacity_is_a_line_of_the_plan_with_its_price(tmp_path):
    from gpuplan.compiler import check_fleet
    from gpuplan.report.render import render_text

    text = edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 1, 1g.10gb: 4}")
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    report = check_fleet(p).resolved.capacity
    [s] = report.stranded
    assert (s.pool, s.resource, s.units, s.gpus, s.cost_per_month) == ("infer", "nvidia.com/mig-3g.40gb", 4, 2.0, 2920.0)
    out = render_text(report)
    assert "Stranded capacity" in out
    row = next(ln for ln in out.splitlines() if "nvidia.com/mig-3g.40gb" in ln and "2,920.00" in ln)
    assert row.split()[:3] == ["infer", "nvidia.com/mig-3g.40gb", "4"]
    # a layout every slice of which some tier names strands nothing
    p.write_text(BASE)
    assert check_fleet(p).resolved.capacity.stranded == ()


def test_gp204_hint_is_yaml_that_fixes_the_layout(tmp_path):
    """Each layout the hint proposes is the spec's own YAML: pasted over the `layout:` line it
    compiles without GP204."""
    import re

    from gpuplan.compiler import check_fleet
    from tests.outputkit import REPO

    text = (REPO / "examples" / "fleet.yaml").read_text()
    line = "        layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}\n"
    assert line in text
    bad = text.replace(line, "        layout: {3g.40gb: 2, 2g.20gb: 1}\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(bad)
    [d] = [d for d in check_fleet(p).diagnostics if d.code == "GP204"]
    proposals = re.findall(r"layout: \{[^}]*\}", d.hint)
    assert proposals
    for proposal in proposals:
        p.write_text(bad.replace("        layout: {3g.40gb: 2, 2g.20gb: 1}\n", f"        {proposal}\n"))
        assert "GP204" not in {x.code for x in check_fleet(p).diagnostics}, proposal
