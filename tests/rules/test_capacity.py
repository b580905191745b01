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


# --- GP434: failure headroom ---------------------------------------------------------------

HEALTH = "      health:\n        nodesDown: 0\n"


def _open(text: str) -> str:
    """BASE without the settings that accept the risk on pools train and infer."""
    return text.replace(HEALTH, "")


def _train_only(text: str) -> str:
    """Pool infer with room for its grants, so that GP434 can only concern pool train."""
    return edit(text, "      nodes: [n3]\n", "      nodes: [n3, n6]\n")


def test_gp434_warns_at_the_pool_without_nodes_down(run):
    text = _train_only(_open(BASE))
    d = only(run(text), "GP434")
    assert d.severity.value == "warning"
    assert d.message == ("pool train: guaranteed grants of tier training (8 GPUs) need every node up: with the "
                         "1 largest node down the pool has 4")
    assert (d.line, d.col) == position(text, "- name: train", len("- name: "))
    assert d.hint == ("add 1 node to the pool's `nodes`, lower the grants by 4, or set `health: {nodesDown: 0}` "
                      "on pool train to accept the risk")


def test_gp434_at_nodes_down_when_set_and_error_by_headroom(run):
    text = edit(_train_only(_open(BASE)), "nodes: [n1, n2]\n",
                "nodes: [n1, n2, n7]\n      health: {nodesDown: 2, headroom: error}\n")
    d = only(run(text), "GP434")
    assert d.severity.value == "error"
    assert d.message.endswith("with the 2 largest nodes down the pool has 4")
    assert (d.line, d.col) == position(text, "nodesDown: 2", len("nodesDown: "))
    # headroom alone: the severity, at the pool's line
    text = edit(_train_only(_open(BASE)), "nodes: [n1, n2]\n", "nodes: [n1, n2]\n      health: {headroom: error}\n")
    d = only(run(text), "GP434")
    assert d.is_error and (d.line, d.col) == position(text, "- name: train", len("- name: "))


def test_gp434_lists_the_tiers_of_one_resource_and_units(run):
    text = edit(_open(BASE), "    - {name: notebooks,",
                "    - {name: serve-b, pool: infer, profile: 1g.10gb, workload: inference}\n    - {name: notebooks,")
    text = edit(text, "serve: 8,", "serve: 8, serve-b: 4,")
    diags = [d for d in run(text) if d.code == "GP434"]
    msgs = sorted(d.message for d in diags)
    assert msgs[0] == ("pool infer: guaranteed grants of tiers serve, serve-b (12 nvidia.com/mig-1g.10gb) need every "
                       "node up: with the 1 largest node down the pool has 0")


def test_gp434_autoscaled_hint_names_max_gpus(run):
    text = edit(_train_only(_open(BASE)), "      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16}\n")
    text = edit(text, "training: 8,", "training: 16,")
    d = only(run(text), "GP434")
    assert d.message.endswith("with the 1 largest node down the pool has 8")
    assert d.hint.startswith("raise the pool's ceiling by 1 node (`maxGPUs: 24`), lower the grants by 8")


def test_gp434_quiet_where_it_fits_or_the_risk_is_accepted(run):
    assert "GP434" not in run.codes(BASE)  # nodesDown: 0 on the pools granted in full
    three = edit(_train_only(_open(BASE)), "nodes: [n1, n2]", "nodes: [n1, n2, n7]")
    assert "GP434" not in run.codes(three)  # 12 GPUs, 8 with one down: the 8 granted fit
    # preemptible tiers hold no headroom: batch fills pool train, notebooks pool dev's one node
    assert "GP434" not in run.codes(edit(_train_only(_open(BASE)), "workload: training,", "workload: batch,"))


def test_gp434_leaves_grants_above_the_whole_pool_to_gp410(run):
    text = edit(_train_only(_open(BASE)), QUOTA, "alpha-ns: {training: 9, serve: 8, notebooks: 16}")
    codes = run.codes(text)
    assert "GP410" in codes and "GP434" not in codes


def test_gp434_not_computed_from_a_layout_that_cannot_exist(run):
    # 3 × 3g.40gb do not fit an A100: GP202, and no headroom from the layout it refuses
    text = edit(BASE, "layout: {1g.10gb: 7}}\n" + HEALTH, "layout: {1g.10gb: 7}}\n")  # pool train keeps its own
    text = edit(_train_only(text), "layout: {1g.10gb: 7}", "layout: {3g.40gb: 3}")
    text = edit(text, "profile: 1g.10gb", "profile: 3g.40gb")
    text = edit(text, "serve: 8,", "serve: 24,")  # 2 nodes × 4 GPUs × 3 = 24: would not fit with one node down
    codes = run.codes(text)
    assert "GP202" in codes and "GP434" not in codes
    ok = edit(text, "layout: {3g.40gb: 3}", "layout: {3g.40gb: 2}")
    ok = edit(ok, "serve: 24,", "serve: 16,")  # 16 with both nodes, 8 with one down
    d = only(run(ok), "GP434")
    assert d.message.startswith("pool infer: guaranteed grants of tier serve (16 nvidia.com/mig-3g.40gb)")
