"""GP420-GP428 and the Kueue ledger: quotas equal grants, borrowing as Kueue computes it,
gangs against pools and queues, and specs without `queueing` unchanged."""

from __future__ import annotations

import pytest

from tests.rules.helpers import BASE, edit, only, position

# BASE: pool train = 2 nodes × 4 A100 (8 nvidia.com/gpu); tier training on it.
QUOTA = "alpha-ns: {training: 8, serve: 8, notebooks: 16}"


def two_tenants(alpha: int = 4, beta: int = 4, alpha_q: str = "", beta_q: str = "", gang: str = "") -> str:
    text = edit(BASE, QUOTA, f"alpha-ns: {{training: {alpha}}}")
    if gang:
        text = edit(text, "workload: training, priority: 1000}",
                    f"workload: training, priority: 1000, maxGPUsPerPod: 4, gang: {gang}}}")
    if alpha_q:
        text += f"      queueing: {alpha_q}\n"
    text += f"    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {{training: {beta}}}\n"
    if beta_q:
        text += f"      queueing: {beta_q}\n"
    return text + "  queueing: {}\n"


def ledger_of(tmp_path, text):
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    checked = check_fleet(p)
    assert checked.resolved is not None
    return checked.resolved.capacity.queues, checked


def test_nominal_quotas_equal_grants_and_the_capacity_ledger(tmp_path):
    from gpuplan.queues import queue_ledger

    text = two_tenants(alpha=3, beta=5)
    ledger, checked = ledger_of(tmp_path, text)
    rf = checked.resolved
    assert queue_ledger(rf) is ledger  # one computation, on the capacity report
    assert [(qp.tenant, [(q.flavor, q.resource, q.nominal) for q in qp.quotas]) for qp in ledger.queues] == [
        ("alpha", [("gpuplan-train", "nvidia.com/gpu", 3)]),
        ("beta", [("gpuplan-train", "nvidia.com/gpu", 5)]),
    ]
    [flavor] = ledger.flavors
    tier = rf.capacity.tier("training")
    assert flavor.nominal == tier.pool_resource_quota == 8 and flavor.capacity == tier.capacity == 8


def test_two_tenants_borrow_exactly_what_the_other_lends(tmp_path):
    # Kueue potentialAvailable (resource_node.go): keep nominal - lendingLimit, lend the rest
    text = two_tenants(alpha=4, beta=4, alpha_q="{lendingLimit: {training: 1}}", beta_q="{lendingLimit: {training: 3}}")
    ledger, _ = ledger_of(tmp_path, text)
    alpha, beta = (ledger.queue(n).quotas[0] for n in ("alpha", "beta"))
    assert (alpha.lendable, beta.lendable) == (1, 3)
    assert alpha.potential == 4 + 3  # its own 4 + what beta lends
    assert beta.potential == 4 + 1
    limited = two_tenants(alpha=4, beta=4, alpha_q="{borrowingLimit: {training: 2}}")
    ledger, _ = ledger_of(tmp_path, limited)
    assert ledger.queue("alpha").quotas[0].potential == 6 and ledger.queue("beta").quotas[0].potential == 8


def test_gang_fits_exactly_quota_plus_borrowable_and_one_more_is_gp421(run):
    # a job of 2 pods × 4 GPUs = 8; alpha has 4 and beta lends 4 -> fits exactly
    ok = two_tenants(alpha=4, beta=4, gang="{nodesPerJob: 2}")
    assert not [c for c in run.codes(ok) if c.startswith("GP42")]
    # beta lends only 3: alpha can reach 7 < 8
    bad = two_tenants(alpha=4, beta=4, gang="{nodesPerJob: 2}", beta_q="{lendingLimit: {training: 3}}")
    d = only(run(bad), "GP421")
    assert "tenant alpha's queue can be admitted at most 7" in d.message and "needs 8" in d.message
    assert d.severity.value == "error"
    assert (d.line, d.col) == position(bad, "nodesPerJob: 2}", len("nodesPerJob: "))


def test_gang_larger_than_pool_is_gp420_at_the_tier(run):
    bad = two_tenants(alpha=4, beta=4, gang="{nodesPerJob: 3}")  # the pool has 2 nodes
    d = only(run(bad), "GP420")
    assert "the pool has 2 nodes" in d.message
    assert (d.line, d.col) == position(bad, "nodesPerJob: 3}", len("nodesPerJob: "))
    wide = two_tenants(alpha=4, beta=4, gang="{nodesPerJob: 2, unitsPerNode: 5}")
    assert "one node advertises 4 nvidia.com/gpu, a pod needs 5" in only(run(wide), "GP420").message


def test_limit_and_reference_errors(run):
    lend = two_tenants(alpha=4, beta=4, alpha_q="{lendingLimit: {training: 5}}")
    d = only(run(lend), "GP422")
    assert (d.line, d.col) == position(lend, "5}}", 0)
    unknown = two_tenants(alpha_q="{borrowingLimit: {serve: 1}}")
    assert "which is not queued" in only(run(unknown), "GP423").message
    no_q = edit(two_tenants(gang="{nodesPerJob: 2}"), "  queueing: {}\n", "")
    assert only(run(no_q), "GP424").severity.value == "warning"
    topo = two_tenants(gang="{nodesPerJob: 2, topologyLevel: example.com/rack}")
    assert only(run(topo), "GP425")
    fixed = edit(topo, "  queueing: {}\n", "  queueing: {topologyLevels: [example.com/rack]}\n")
    assert "GP425" not in run.codes(fixed)
    mixed = edit(two_tenants(), "  queueing: {}\n", "  queueing: {tiers: [serve]}\n")
    mixed = edit(mixed, "  tiers:\n", "  tiers:\n    - {name: other, pool: infer, profile: 1g.10gb}\n")
    assert "tier other is not queued" in only(run(mixed), "GP426").message
    child = two_tenants(alpha_q="{cohort: gpuplan-small}")
    assert only(run(child), "GP428")
    unreachable = two_tenants(alpha=4, beta=4, alpha_q="{borrowingLimit: {training: 6}}")
    assert "the other queues lend only 4" in only(run(unreachable), "GP427").message


def test_units_agree_across_the_cohort(tmp_path):
    """Every ClusterQueue of the cohort covers the same flavors and resource names, and
    each name is one the tenants' ResourceQuotas count (requests.<name>) and the flavor's
    pool advertises."""
    from gpuplan.compiler import compile_fleet
    from gpuplan.units import pool_resources
    from tests.outputkit import REPO, docs

    c = compile_fleet(REPO / "examples" / "kueue.yaml", out_dir=tmp_path / "generated")
    cqs = docs(c.files["kueue/clusterqueues.yaml"])
    assert len(cqs) == 3
    per_flavor: dict[str, set] = {}
    for cq in cqs:
        for g in cq["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                per_flavor.setdefault(f["name"], set()).add(tuple(r["name"] for r in f["resources"]))
    assert per_flavor and all(len(names) == 1 for names in per_flavor.values()), per_flavor
    rf = c.resolved
    for cq in cqs:
        tenant = cq["metadata"]["labels"]["gpuplan.dev/tenant"]
        rq = next(d for d in docs(c.files[f"tenants/{tenant}/resourcequotas.yaml"])
                  if d["metadata"]["name"] == "gpuplan-gpus")
        for g in cq["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                pool = f["name"].removeprefix("gpuplan-")
                advertised = pool_resources(rf.pool_by_name[pool])
                for r in f["resources"]:
                    assert f"requests.{r['name']}" in rq["spec"]["hard"]
                    assert advertised.get(r["name"], 0) > 0


def test_resource_quotas_allow_what_kueue_may_admit_to_kueue_held_pods_only(tmp_path):
    """A pod Kueue admitted must not be refused by the namespace's ResourceQuota, and no pod
    outside Kueue may spend what Kueue could lend: a queued tier's class-scoped quota is the
    queue's most admissible, only in namespaces granted the tier; every other class is held
    to its grants (gpuplan-other-priorities); a namespace without a queued tier gets no ceiling."""
    from gpuplan.compiler import compile_fleet
    from tests.outputkit import REPO, docs

    c = compile_fleet(REPO / "examples" / "kueue.yaml", out_dir=tmp_path / "generated")
    rf = c.resolved
    ledger = rf.capacity.queues
    quotas = {(d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"]
              for qp in ledger.queues for d in docs(c.files[f"tenants/{qp.tenant}/resourcequotas.yaml"])}
    for qp in ledger.queues:
        tn = next(t for t in rf.fleet.spec.tenants if t.name == qp.tenant)
        for ns in tn.namespaces:
            granted = {t for t, u in tn.quotas.get(ns, {}).items() if u > 0 and t in ledger.queued_tiers}
            for t in granted:
                tier = rf.tier_by_name[t]
                spec = quotas[(ns, f"gpuplan-tier-{t}")]
                assert spec["hard"] == {"requests.nvidia.com/gpu": str(qp.quota(tier.pool, "nvidia.com/gpu").potential)}
                assert spec["scopeSelector"]["matchExpressions"] == [
                    {"scopeName": "PriorityClass", "operator": "In", "values": [f"gpuplan-{t}"]}]
            if granted:
                other = quotas[(ns, "gpuplan-other-priorities")]
                assert other["hard"]["requests.nvidia.com/gpu"] == "0"
    # vision-serve has no queued tier: its quota is its grant (8 MIG slices), no GPU ceiling
    assert quotas[("vision-serve", "gpuplan-gpus")]["hard"]["requests.nvidia.com/gpu"] == "0"
    assert quotas[("vision-serve", "gpuplan-gpus")]["hard"]["requests.nvidia.com/mig-3g.40gb"] == "8"
    # vision-train: training and batch share the train-h100 ceiling (32), burst-training its own (32)
    assert quotas[("vision-train", "gpuplan-gpus")]["hard"]["requests.nvidia.com/gpu"] == "64"
    # the example's tenants: grants 28 / 32 / 4 GPUs, admissible 64 / 48 / 20
    assert [sum(q.potential for q in qp.quotas) for qp in ledger.queues] == [64, 48, 20]


@pytest.mark.parametrize("example", ["fleet", "aws-burst", "flux-onprem"])
def test_specs_without_queueing_emit_no_kueue(example):
    from gpuplan.compiler import compile_fleet
    from tests.outputkit import REPO

    c = compile_fleet(REPO / "examples" / f"{example}.yaml")
    assert c.resolved.capacity.queues is None
    # (every fleet has tenant pages, the tenant contract; none of them mentions Kueue)
    assert not [p for p in c.files if p.startswith("kueue/")]
    assert not [p for p, b in c.files.items() if b"kueue.x-k8s.io" in b]


def test_dropping_queueing_restores_the_plain_quotas(tmp_path):
    """The same spec without the queueing parts compiles to the tree of a spec that never had them."""
    from gpuplan.compiler import compile_fleet
    from tests.outputkit import REPO

    text = (REPO / "examples" / "kueue.yaml").read_text(encoding="utf-8")
    plain = text.split("  queueing:\n")[0] + "  tenants:" + text.split("  tenants:")[1]
    for block in ("      queueing:\n        fairSharingWeight: 2\n        lendingLimit: {burst-training: 8}\n",
                  "      queueing:\n        borrowingLimit: {training: 8}\n",
                  "      queueing:\n        borrowingLimit: {batch: 8, burst-training: 8}\n        fairSharingWeight: 1\n",
                  "      gang:\n        nodesPerJob: 2\n        topologyLevel: topology.example.com/rack\n"):
        plain = edit(plain, block, "")
    p = tmp_path / "plain.yaml"
    p.write_text(plain, encoding="utf-8")
    c = compile_fleet(p, out_dir=tmp_path / "generated")
    assert not [d for d in c.diagnostics if d.is_error]
    assert not [f for f in c.files if f.startswith("kueue/") or "localqueues" in f or "delivery/kueue" in f]
    from tests.outputkit import docs

    [rq] = [d for d in docs(c.files["tenants/nlp/resourcequotas.yaml"]) if d["metadata"]["name"] == "gpuplan-gpus"]
    hard = rq["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "32"  # the grants: training 16 + burst-training 16


@pytest.mark.slow
def test_gp429_more_flavors_than_a_cluster_queue_holds(run):
    """Kueue's ClusterQueue schema: at most 64 flavors per resource group."""
    def fleet(pools: int) -> str:
        lines = ["apiVersion: gpuplan.dev/v1alpha1", "kind: Fleet", "metadata: {name: wide}", "spec:",
                 "  cluster:", '    kubernetesVersion: "1.33"',
                 "    gitops: {repoURL: \"https://git.example.com/fleet.git\"}", "  pools:"]
        lines += [f"    - {{name: p{i}, gpu: A100-SXM4-80GB, gpusPerNode: 1, nodes: [n{i}]}}" for i in range(pools)]
        lines += ["  tiers:"] + [f"    - {{name: t{i}, pool: p{i}, workload: training}}" for i in range(pools)]
        lines += ["  queueing: {}", "  tenants:", "    - name: a", "      namespaces: [a]", "      quotas:",
                  "        a: {" + ", ".join(f"t{i}: 1" for i in range(pools)) + "}"]
        return "\n".join(lines) + "\n"

    assert "GP429" not in run.codes(fleet(64))
    d = only(run(fleet(65)), "GP429")
    assert "65 flavors for nvidia.com/gpu (at most 64)" in d.message


def test_a_queue_covers_only_what_the_tenant_was_granted_or_borrows(tmp_path):
    """Kueue lets a ClusterQueue use only the flavors and resources it lists: a tenant with no
    grant on a tier gets none of it through the queue, unless it names the tier in its limits."""
    text = two_tenants(alpha=4, beta=4)
    text = edit(text, "  tiers:\n", "  tiers:\n    - {name: burst, pool: dev, workload: batch}\n")
    text = edit(text, "beta-ns: {training: 4}", "beta-ns: {training: 4, burst: 8}")
    ledger, _ = ledger_of(tmp_path, text)
    assert [(q.pool, q.nominal) for q in ledger.queue("alpha").quotas] == [("train", 4)]
    borrowing = edit(text, "  queueing: {}\n", "  queueing: {}\n")
    borrowing = edit(borrowing, "    - name: beta\n", "      queueing: {borrowingLimit: {burst: 2}}\n    - name: beta\n")
    ledger, _ = ledger_of(tmp_path, borrowing)
    dev = ledger.queue("alpha").quota("dev", "nvidia.com/gpu.shared")
    assert (dev.nominal, dev.borrowing_limit, dev.potential) == (0, 2, 2)


def test_plan_shows_queues_next_to_quotas(tmp_path):
    import json

    from gpuplan.compiler import check_fleet
    from gpuplan.report.render import render
    from tests.outputkit import REPO

    rf = check_fleet(REPO / "examples" / "kueue.yaml").resolved
    text = render("text", rf.capacity)
    assert text.index("Tenants") < text.index("Queues (Kueue)")
    row = next(line.split() for line in text.splitlines() if line.startswith("gpuplan-nlp ") and "train-h100" in line)
    assert row == ["gpuplan-nlp", "gpuplan-train-h100", "nvidia.com/gpu", "16", "16", "8", "24"]
    assert "| cohort gpuplan-kueue-lab | gpuplan-train-h100 | nvidia.com/gpu | 32 |" in render("markdown", rf.capacity)
    data = json.loads(render("json", rf.capacity))["queues"]
    [train] = [f for f in data["flavors"] if f["flavor"] == "gpuplan-train-h100"]
    assert train["nominal"] == train["resourceQuota"] == train["capacity"] == 32
    assert {q["name"] for q in data["clusterQueues"]} == {"gpuplan-vision", "gpuplan-nlp", "gpuplan-research"}


def test_kueue_quotas_above_the_pool_are_gp410_unless_overcommit_is_declared(run):
    """One ledger: the queues' nominal quotas per flavor are the tiers' quotas, so GP410 proves
    them against what the pool advertises, and `maxOversubscription` is the explicit overcommit."""
    over = two_tenants(alpha=6, beta=4)  # 10 nvidia.com/gpu on a pool of 8
    d = only(run(over), "GP410")
    assert d.message.startswith("quota 10 nvidia.com/gpu on tier training exceeds capacity 8")
    allowed = edit(over, "workload: training, priority: 1000}", "workload: training, priority: 1000, maxOversubscription: 1.25}")
    assert "GP410" not in run.codes(allowed)


def test_html_plan_has_the_queue_table_only_with_queueing():
    from gpuplan.compiler import check_fleet
    from gpuplan.report.render import render
    from tests.outputkit import REPO

    with_q = render("html", check_fleet(REPO / "examples" / "kueue.yaml").resolved.capacity)
    assert "<h2>Queues (Kueue)</h2>" in with_q and "<td>gpuplan-research</td>" in with_q
    without = render("html", check_fleet(REPO / "examples" / "fleet.yaml").resolved.capacity)
    assert "Queues (Kueue)" not in without


def test_schema_errors_in_the_queueing_section_point_at_the_line(tmp_path):
    from gpuplan.compiler import check_fleet

    for bad, needle in (("{nodesPerJob: 1}", "1}"), ("{nodesPerJob: 2, unitsPerNode: 0}", "0}")):
        text = two_tenants(gang=bad)
        p = tmp_path / "bad.yaml"
        p.write_text(text, encoding="utf-8")
        checked = check_fleet(p)
        assert checked.resolved is None
        [d] = [d for d in checked.diagnostics if d.is_error]
        assert d.code.startswith("GP1") and (d.line, d.col) == position(text, needle)
    text = edit(two_tenants(), "  queueing: {}\n", "  queueing: {integrations: [batch/jobs]}\n")
    p.write_text(text, encoding="utf-8")
    [d] = [d for d in check_fleet(p).diagnostics if d.is_error]
    assert d.code.startswith("GP1") and (d.line, d.col) == position(text, "batch/jobs")
