"""The wave-by-wave node model (gpuplan.report.transition) over before/after build pairs.

Each test builds a tree, changes the spec, builds again over that tree (as `gpuplan
build` does) and asserts, for every node class of every pool after every step of the
engine's sync, what it carries (`gpuplan.dev/pool`, `nvidia.com/device-plugin.config`,
`nvidia.com/mig.config`) and needs (those configs in the ConfigMaps applied by then,
the resources its tiers request). Then it builds the tree the way gpuplan did before
old names were kept (or the project delivered through Git) and asserts the model
reports the stranded nodes, the window or the blocked sync.

Upstream behaviour modelled (cited in the module): nfd-master relabels every node on a
NodeFeatureRule change (node-feature-discovery v0.19.0
pkg/nfd-master/nfd-api-controller.go:280-296); Karpenter labels a node once, at
registration (karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/registration.go:
207-221), and drift replaces it only where a `Drifted` budget allows
(pkg/apis/v1/nodepool.go:364-378); Argo CD applies in sync-wave order and prunes in
reverse (gitops-engine sync_context.go:1097-1125 in argo-cd v3.5.1); Flux applies the
root Kustomization after the operator's (dependsOn), in one apply, then prunes
(kustomize-controller v1.9.4 kustomization_controller.go:246,473,504)."""

from __future__ import annotations

from pathlib import Path

import yaml
from tests.lower.test_config_transitions import MPS_POOL, SLICED
from tests.outputkit import docs
from tests.rules.helpers import BASE, edit

from gpuplan.compiler import Options, compile_fleet
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL as PLUGIN, MIG_CONFIG_LABEL as MIG, POOL_LABEL
from gpuplan.output.objdiff import tree_objects
from gpuplan.output.tree import write_tree
from gpuplan.report.disruption import disruptions
from gpuplan.report.transition import BEFORE, tier_needs, transition

REPO = Path(__file__).resolve().parents[2]
AWS = (REPO / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
BOOT, PROJECT = "delivery/bootstrap.yaml", "delivery/project/appproject.yaml"
CM, MIG_CM = "gpu-operator/device-plugin-config.yaml", "gpu-operator/mig-parted-config.yaml"
FLUX = ("    gitops:\n", "    gitops:\n      engine: flux\n")
ARGO_STEPS = [BEFORE, "wave -2", "wave -1", "wave 1"]

ALPHA_QUOTA = "        alpha-ns: {training: 8, serve: 8, notebooks: 16}\n"
TWO = edit(BASE, ALPHA_QUOTA, "        alpha-ns: {training: 8, serve: 8, notebooks: 8}\n"
           "    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {notebooks: 8}\n")
RENAMED = BASE.replace("alpha-ns", "alpha-team")
DEV8 = ("sharing: {mode: time-slicing, replicas: 4}", "sharing: {mode: time-slicing, replicas: 8}")


class Built:
    def __init__(self, files, rf):
        self.files, self.rf = files, rf


def _build(tmp_path: Path, text: str, *, fresh: bool = False) -> Built:
    """Build ``text`` over the tree in tmp_path/generated (``fresh``: as gpuplan did before it
    read the old tree, keeping no name), write it, return it."""
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "generated"
    c = compile_fleet(spec, out_dir=out, options=Options(keep_previous=not fresh))
    assert c.files, [str(d) for d in c.diagnostics if d.is_error]
    if not fresh:
        write_tree(out, dict(c.files), force=True)
    return Built(dict(c.files), c.resolved)


def _model(old: Built, new: Built):
    return transition(tree_objects(old.files), tree_objects(new.files), tier_needs(new.rf))


def _pair(tmp_path: Path, before: str, after: str):
    old = _build(tmp_path, before)
    new = _build(tmp_path, after)
    return old, new, _model(old, new)


def _rule_labels(files, pool: str) -> dict[str, str]:
    [nfr] = [d for d in docs(files[f"pools/{pool}/node-labels.yaml"]) if d["kind"] == "NodeFeatureRule"]
    return nfr["spec"]["rules"][0]["labels"]


def _template(files, pool: str) -> dict[str, str]:
    return docs(files[f"pools/{pool}/nodepool.yaml"])[0]["spec"]["template"]["metadata"]["labels"]


def _carried(labels: dict[str, str]) -> dict[str, str]:
    return {k: labels[k] for k in (POOL_LABEL, PLUGIN, MIG) if k in labels}


def _needs(labels: dict[str, str]) -> dict[str, str]:
    """The configs a node with these labels reads: the GPU Operator runs an operand only where
    its `nvidia.com/gpu.deploy.<operand>` label is not "false" (operands: none at all)."""
    on = labels.get("nvidia.com/gpu.deploy.operands") != "false"
    out = {}
    if PLUGIN in labels and on and labels.get("nvidia.com/gpu.deploy.device-plugin") != "false":
        out["device-plugin config"] = labels[PLUGIN]
    if MIG in labels and on and labels.get("nvidia.com/gpu.deploy.mig-manager") != "false":
        out["mig-parted config"] = labels[MIG]
    return out


def _assert_unchanged_everywhere(t, files, pools: list[str], kind="static") -> None:
    """Every class of ``pools`` carries its labels at every step and misses nothing."""
    for pool in pools:
        labels = _rule_labels(files, pool) if kind == "static" else _template(files, pool)
        [cls] = t.pool_classes(pool)
        for step in t.steps:
            s = t.states[(cls, step)]
            assert s.present and dict(s.carries) == _carried(labels), (pool, step)
            assert dict(s.needs) == _needs(labels) and s.missing == () and s.requested == (), (pool, step)


def _legacy(files: dict[str, bytes], confirm: bool = True) -> dict[str, bytes]:
    """The same tree in gpuplan's layout before the project had its own Application: the
    AppProject in bootstrap.yaml (applied by hand), Namespaces with Prune=confirm."""
    out = dict(files)
    keep = [d for d in docs(files[BOOT]) if d["metadata"]["name"] not in ("gpuplan-small-admin",
                                                                            "gpuplan-small-project")]
    out[BOOT] = b"---\n".join(yaml.safe_dump(d).encode() for d in docs(files[PROJECT]) + keep)
    del out[PROJECT]
    if confirm:
        for path, data in files.items():
            if path.endswith("namespaces.yaml"):
                out[path] = data.replace(b"Prune=false", b"Prune=confirm")
    return out


# --- tenants ---------------------------------------------------------------------------------


def test_argocd_add_tenant_with_a_static_sharing_change(tmp_path):
    """A tenant added in the same commit as dev's time-slicing replicas 4 -> 8: the
    Namespace applies at wave -2, the ConfigMaps and quotas at -1, the NodeFeatureRules
    at 1. dev's static nodes carry the old name until wave 1 (nfd-master relabels them),
    and the device-plugin ConfigMap keeps that name, so no wave misses it; building the
    same spec again keeps it (a fixed point, so `gpuplan check` agrees), the next change
    replaces it. Built fresh (no name kept), wave -1 is a window."""
    old, new, t = _pair(tmp_path, BASE, edit(TWO, *DEV8))
    assert t.engine == "argocd" and not t.blocked and t.steps == ARGO_STEPS
    _assert_unchanged_everywhere(t, new.files, ["train", "infer"])
    was, now = _rule_labels(old.files, "dev"), _rule_labels(new.files, "dev")
    assert was[PLUGIN] != now[PLUGIN]
    for step in t.steps:
        s = t.at("dev", step)
        labels = now if step == "wave 1" else was
        assert dict(s.carries) == _carried(labels) and dict(s.needs) == _needs(labels)
        assert s.missing == () and s.advertises == ("nvidia.com/gpu.shared",) and s.requested == ()
    assert t.at("dev", "wave 1").fate == "relabelled by nfd-master; the device plugin restarts"
    assert t.findings == []
    assert not [d for d in disruptions(old.files, new.files) if d.severity in ("hand-step", "stranded")]
    cm = docs(new.files[CM])[0]
    assert {was[PLUGIN], now[PLUGIN]} <= set(cm["data"])
    assert cm["data"][was[PLUGIN]] == docs(old.files[CM])[0]["data"][was[PLUGIN]]  # verbatim

    # the same spec built again over that tree: the same tree (`gpuplan check` passes)
    third = _build(tmp_path, edit(TWO, *DEV8))
    assert third.files == new.files
    # the next change replaces the kept name: at most one old name per static pool
    fourth = _build(tmp_path, edit(TWO, *DEV8).replace("replicas: 8}", "replicas: 6}"))
    names = set(docs(fourth.files[CM])[0]["data"])
    assert was[PLUGIN] not in names and now[PLUGIN] in names
    t4 = _model(new, fourth)
    assert t4.findings == []

    # built fresh, the old name is gone between the ConfigMaps and the rule: a window
    sub = tmp_path / "fresh"
    sub.mkdir()
    fresh = _model(_build(sub, BASE), _build(sub, edit(TWO, *DEV8), fresh=True))
    assert [(f.kind, f.pool, f.steps) for f in fresh.findings] == [("window", "dev", ("wave -1",))]
    assert fresh.at("dev", "wave -1").missing == (f"device-plugin config {was[PLUGIN]}",)

    # before the project had its own Application: the hand-applied project refuses beta-ns,
    # the root sync fails before wave -2, and dev's change never reaches a node
    pre = transition(tree_objects(_legacy(old.files)), tree_objects(_legacy(new.files, confirm=False)))
    assert pre.blocked and pre.steps == [BEFORE] and pre.findings[0].kind == "blocked"
    assert pre.at("dev", BEFORE).carries[PLUGIN] == was[PLUGIN]


def test_argocd_remove_and_rename_tenant(tmp_path):
    """Removing beta prunes its quota (wave 0) and keeps its Namespace; renaming alpha-ns
    applies alpha-team at wave -2: no node class changes in any step. Before, the live
    Namespaces carried Prune=confirm and the sync held: nothing applied."""
    for i, (before, after) in enumerate(((TWO, BASE), (BASE, RENAMED))):
        sub = tmp_path / str(i)
        sub.mkdir()
        old, new, t = _pair(sub, before, after)
        assert not t.blocked and t.steps[0] == BEFORE and len(t.steps) > 1
        _assert_unchanged_everywhere(t, new.files, ["train", "infer", "dev"])
        assert t.findings == []
        pre = transition(tree_objects(_legacy(old.files)), tree_objects(_legacy(new.files)))
        assert pre.blocked and pre.findings[0].kind == "blocked"


def test_flux_add_rename_remove_tenant(tmp_path):
    """Flux applies the root Kustomization in one step, then prunes: dev's static nodes
    are relabelled in the same step as the ConfigMap, so there is no window at all. A tenant's
    objects are the tenancy Kustomization's, not the root's: removing or renaming one changes
    nothing the root holds (no step). (Flux has no project and never held a sync for a
    namespace: no earlier gpuplan tree failed here, so there is no pre-fix tree to contrast.)"""
    for i, (before, after, steps) in enumerate(((BASE, edit(TWO, *DEV8), [BEFORE, "apply"]),
                                                (TWO, BASE, [BEFORE]),
                                                (BASE, RENAMED, [BEFORE]))):
        sub = tmp_path / str(i)
        sub.mkdir()
        old, new, t = _pair(sub, before.replace(*FLUX, 1), after.replace(*FLUX, 1))
        assert t.engine == "flux" and not t.blocked and t.steps == steps
        _assert_unchanged_everywhere(t, new.files, ["train", "infer"])
        if after != BASE and DEV8[1] in after:
            assert t.at("dev", BEFORE).carries[PLUGIN] == _rule_labels(old.files, "dev")[PLUGIN]
            assert t.at("dev", "apply").carries[PLUGIN] == _rule_labels(new.files, "dev")[PLUGIN]
        for step in t.steps:
            assert t.at("dev", step).missing == ()
        assert t.findings == []


# --- Karpenter -------------------------------------------------------------------------------


MPS = AWS.replace("\n  tiers:", MPS_POOL, 1)


def _rename(files: dict[str, bytes], pools: list[str]) -> dict[str, bytes]:
    """The tree gpuplan wrote before a pool's config name depended on that pool alone: adding
    the MPS pool flipped the cluster strategy, which renamed every pool's config and dropped
    the old names (the NodePool template carries the new one)."""
    out = dict(files)
    cm = docs(files[CM])[0]
    for pool in pools:
        path = f"pools/{pool}/nodepool.yaml"
        np_ = docs(files[path])[0]
        name = np_["spec"]["template"]["metadata"]["labels"][PLUGIN]
        np_["spec"]["template"]["metadata"]["labels"][PLUGIN] = name[:-8] + "0badc0de"
        cm["data"][name[:-8] + "0badc0de"] = cm["data"].pop(name)
        out[path] = yaml.safe_dump(np_).encode()
    out[CM] = yaml.safe_dump(cm).encode()
    return out


def test_adding_an_mps_pool_to_aws_burst(tmp_path):
    """The cluster strategy flips from mixed to "" (the operator's Application, wave -1)
    but no existing pool's template or config name changes: each keeps one class that
    carries and needs the same at every step; mig-a100 still advertises its MIG profiles
    (its own file says mixed). The new pool's nodes exist from wave 0 (its NodePool)."""
    old, new, t = _pair(tmp_path, AWS, MPS)
    assert t.steps == [BEFORE, "wave -1", "wave 0"]
    _assert_unchanged_everywhere(t, new.files, ["train-h100", "mig-a100", "infer-l40s"], kind="karpenter")
    assert t.at("mig-a100", "wave 0").advertises == (
        "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb")
    assert t.at("train-h100", "wave 0").advertises == ("nvidia.com/gpu",)
    assert t.at("infer-l40s", "wave 0").needs == {}  # Bottlerocket: no operator device plugin reads it
    l4 = t.pool_classes("notebooks-l4")
    assert [c.generation for c in l4] == [""]
    assert [t.states[(l4[0], s)].present for s in t.steps] == [False, False, True]
    assert t.at("notebooks-l4", "wave 0").fate == "launched on demand"
    assert t.at("notebooks-l4", "wave 0").missing == ()
    assert t.findings == []

    pre = _model(old, Built(_rename(new.files, ["train-h100", "mig-a100"]), new.rf))
    stranded = {f.pool: f for f in pre.findings if f.kind == "stranded"}
    assert set(stranded) == {"train-h100", "mig-a100"}
    assert stranded["train-h100"].steps == ("wave -1", "wave 0")  # from the ConfigMap's wave on
    assert pre.at("train-h100", "wave 0", "old").fate.startswith("kept, drift blocked")
    ds = disruptions(old.files, _rename(new.files, ["train-h100", "mig-a100"]))
    assert [d.severity for d in ds][:2] == ["stranded", "stranded"]
    assert {d.subject for d in ds[:2]} == {"pool train-h100 (old Karpenter nodes)",
                                           "pool mig-a100 (old Karpenter nodes)"}


def test_time_slicing_replicas_on_a_drift_blocked_karpenter_pool(tmp_path):
    """batch-l4 blocks drift: its old nodes keep the old name until expireAfter and still
    need it in every step; the build keeps it, so nothing strands. Built fresh (no kept
    name), the model reports the old nodes stranded from wave -1 on."""
    old, new, t = _pair(tmp_path, SLICED, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    was, now = _template(old.files, "batch-l4"), _template(new.files, "batch-l4")
    assert was[PLUGIN] != now[PLUGIN]
    assert [c.generation for c in t.pool_classes("batch-l4")] == ["old", "new"]
    for step in t.steps:
        o, n = t.at("batch-l4", step, "old"), t.at("batch-l4", step, "new")
        assert dict(o.carries) == _carried(was) and dict(o.needs) == _needs(was) and o.missing == ()
        assert o.advertises == ("nvidia.com/gpu.shared",) and o.requested == ()
        assert n.present == (step == "wave 0")
        if n.present:
            assert dict(n.carries) == _carried(now) and n.missing == ()
    assert t.at("batch-l4", "wave 0", "old").fate == (
        "kept, drift blocked (budget 0 for Drifted), until expireAfter 720h")
    _assert_unchanged_everywhere(t, new.files, ["train-h100", "mig-a100"], kind="karpenter")
    assert t.findings == []

    fresh = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1), fresh=True)
    pre = _model(old, fresh)
    [f] = pre.findings
    assert (f.kind, f.pool, f.nodes.generation, f.steps) == ("stranded", "batch-l4", "old", ("wave -1", "wave 0"))
    assert f"device-plugin config {was[PLUGIN]}" in f.message


def test_a_sharing_change_leaves_old_karpenter_nodes_idle(tmp_path):
    """batch-l4 from time-slicing to exclusive: its old nodes (drift blocked) still advertise
    nvidia.com/gpu.shared while the batch tier now requests nvidia.com/gpu, so no batch pod
    lands there until they expire; the new nodes advertise what it requests."""
    after = SLICED.replace("sharing: {mode: time-slicing, replicas: 2}", "sharing: {mode: exclusive}", 1)
    old, new, t = _pair(tmp_path, SLICED, after)
    o, n = t.at("batch-l4", "wave 0", "old"), t.at("batch-l4", "wave 0", "new")
    assert o.advertises == ("nvidia.com/gpu.shared",) and o.requested == ("nvidia.com/gpu",) and o.missing == ()
    assert n.advertises == ("nvidia.com/gpu",) and n.requested == ()
    [f] = t.findings
    assert (f.kind, f.pool, f.nodes.generation) == ("idle", "batch-l4", "old")
    ds = disruptions(old.files, new.files, tier_needs(new.rf))
    [d] = [d for d in ds if d.severity == "stranded"]
    assert d.subject == "pool batch-l4 (old Karpenter nodes)"
    assert "sit idle until they expire (expireAfter 720h; the pool's budget blocks drift)" in d.message
    from gpuplan.report.disruption import by_pool

    assert by_pool(ds) == ["pool batch-l4: nodes stranded (Karpenter), every node replaced as it expires "
                           "(Karpenter, drift blocked)"]
    # without the tiers' requests (a caller that has no resolved fleet) the model cannot tell
    assert not [d for d in disruptions(old.files, new.files) if d.severity == "stranded"]


def test_a_karpenter_mig_layout_change(tmp_path):
    """mig-a100's layout changes: its old nodes keep the old nvidia.com/mig.config (and
    device-plugin config) until drift replaces them; the mig-parted ConfigMap keeps the old
    layout, so they miss nothing in any wave. Built fresh, they need a layout that is gone."""
    layout = ("layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}")
    old, new, t = _pair(tmp_path, AWS, edit(AWS, *layout))
    was, now = _template(old.files, "mig-a100"), _template(new.files, "mig-a100")
    assert was[MIG] != now[MIG]
    for step in t.steps:
        o = t.at("mig-a100", step, "old")
        assert dict(o.carries) == _carried(was) and dict(o.needs) == _needs(was) and o.missing == ()
        assert o.advertises == ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb")
    assert t.at("mig-a100", "wave 0", "old").fate == "replaced by drift (within the pool's disruption budgets)"
    assert dict(t.at("mig-a100", "wave 0", "new").carries) == _carried(now)
    _assert_unchanged_everywhere(t, new.files, ["train-h100", "infer-l40s"], kind="karpenter")
    assert t.findings == []

    # built fresh, the old layout's name is gone: stranded wherever mig-manager reads the label
    pre = _model(old, _build(tmp_path, edit(AWS, *layout), fresh=True))
    if "mig-parted config" in _needs(was):
        [f] = pre.findings
        assert f.kind == "stranded" and f.pool == "mig-a100" and f"mig-parted config {was[MIG]}" in f.message
    else:  # the layout is applied at boot: no mig-manager on these nodes, nothing reads the old name
        assert pre.findings == []


def _mig_configs(files) -> dict:
    return yaml.safe_load(docs(files[MIG_CM])[0]["data"]["config.yaml"])["mig-configs"]


def test_a_static_mig_layout_change(tmp_path):
    """infer (static, n3) from 7x 1g.10gb to 2x 3g.40gb: nfd-master relabels n3 at wave 1
    and mig-manager repartitions it. Until then n3 carries its old nvidia.com/mig.config,
    which the mig-parted ConfigMap (wave -1) keeps: no window. Building the same spec over
    that tree keeps it (a fixed point); the next layout change replaces it. Built fresh,
    wave -1 is a window; under Flux the rule and the ConfigMaps apply together."""
    change = edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 2}").replace(
        "serve, pool: infer, profile: 1g.10gb", "serve, pool: infer, profile: 3g.40gb")
    old, new, t = _pair(tmp_path, BASE, change)
    was, now = _rule_labels(old.files, "infer"), _rule_labels(new.files, "infer")
    assert was[MIG] != now[MIG]
    assert t.pool_classes("infer")[0].nodes == ("n3",)
    assert was[PLUGIN] == now[PLUGIN]  # the plugin's file says only `mixed`: the same name
    assert t.steps == [BEFORE, "wave -1", "wave 1", "wave 2"]  # no Namespace (-2) or wave 0 object changes
    for step in (BEFORE, "wave -1"):
        s = t.at("infer", step)
        assert dict(s.carries) == _carried(was) and s.missing == (), step
        assert s.advertises == ("nvidia.com/mig-1g.10gb",), step
    s = t.at("infer", "wave 1")
    assert dict(s.carries) == _carried(now) and s.missing == ()
    assert s.fate == "relabelled by nfd-master; mig-manager drains and repartitions"
    assert s.advertises == ("nvidia.com/mig-3g.40gb",) and s.requested == ()
    assert t.findings == []
    _assert_unchanged_everywhere(t, new.files, ["train", "dev"])
    # the new mig-parted ConfigMap holds both names, the old one's entries verbatim
    assert _mig_configs(new.files)[was[MIG]] == _mig_configs(old.files)[was[MIG]]
    assert now[MIG] in _mig_configs(new.files)

    # a third build over the second tree, same spec: the same tree (`gpuplan check` passes)
    third = _build(tmp_path, change)
    assert third.files == new.files
    # the next layout change replaces the kept name, and misses nothing
    again = change.replace("layout: {3g.40gb: 2}", "layout: {2g.20gb: 3}").replace(
        "serve, pool: infer, profile: 3g.40gb", "serve, pool: infer, profile: 2g.20gb")
    fourth = _build(tmp_path, again)
    assert was[MIG] not in _mig_configs(fourth.files) and now[MIG] in _mig_configs(fourth.files)
    t4 = _model(new, fourth)
    assert t4.findings == []

    # built fresh (no name kept): the window the kept name closes
    sub = tmp_path / "fresh"
    sub.mkdir()
    pre = _model(_build(sub, BASE), _build(sub, change, fresh=True))
    assert pre.at("infer", "wave -1").missing == (f"mig-parted config {was[MIG]}",)
    assert [(f.kind, f.pool, f.steps) for f in pre.findings] == [("window", "infer", ("wave -1",))]

    sub = tmp_path / "flux"
    sub.mkdir()
    _, _, tf = _pair(sub, BASE.replace(*FLUX, 1), change.replace(*FLUX, 1))
    assert tf.steps == [BEFORE, "apply"] and tf.findings == []
    assert tf.at("infer", "apply").carries[MIG] == now[MIG]


def test_building_twice_on_an_unchanged_spec_keeps_nothing(tmp_path):
    """No kept name appears from nothing: a second build of the same spec over its own tree
    writes the same bytes, and neither ConfigMap lists a kept name."""
    from gpuplan.identity import KEPT_CONFIGS_ANNOTATION

    first, second = _build(tmp_path, BASE), _build(tmp_path, BASE)
    assert first.files == second.files
    for path in (CM, MIG_CM):
        assert KEPT_CONFIGS_ANNOTATION not in (docs(second.files[path])[0]["metadata"].get("annotations") or {})


def test_dropping_the_overlay_of_a_karpenter_mig_pool_is_refused_and_writes_nothing(tmp_path):
    """GP615: no instance type offers nvidia.com/mig-* before a node exists, so Karpenter
    never launches for the MIG tiers (karpenter v1.14.1 scheduling/scheduler.go:725-760).
    `gpuplan build` refuses the spec and leaves the existing tree as it was: the model over
    the unchanged tree finds nothing to do."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli
    from gpuplan.output.tree import read_tree

    old = _build(tmp_path, AWS)
    before = read_tree(tmp_path / "generated", [])
    overlay = "        amiVersion: v20260714\n        nodeOverlay: true\n"
    (tmp_path / "fleet.yaml").write_text(edit(AWS, overlay, "        amiVersion: v20260714\n"), encoding="utf-8")
    r = CliRunner().invoke(cli, ["build", str(tmp_path / "fleet.yaml"), "-o", str(tmp_path / "generated")],
                           catch_exceptions=False)
    assert r.exit_code != 0 and "GP615" in r.output
    after = read_tree(tmp_path / "generated", [])
    assert after == before
    t = transition(tree_objects(old.files), tree_objects(after))
    assert t.steps == [BEFORE] and t.findings == []


def test_diff_and_plan_base_list_stranded_nodes_before_replacements(tmp_path):
    """`gpuplan diff` (the tree on disk against the spec) and `gpuplan plan --base` (two specs,
    the PR report's source) give the model the tiers' requests and list the stranded old nodes
    right after the hand steps, before the NodePool's replacement, with the pool's line."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli

    _build(tmp_path, SLICED)
    after = SLICED.replace("sharing: {mode: time-slicing, replicas: 2}", "sharing: {mode: exclusive}", 1)
    (tmp_path / "new.yaml").write_text(after, encoding="utf-8")
    (tmp_path / "old.yaml").write_text(SLICED, encoding="utf-8")
    run = CliRunner().invoke
    text = run(cli, ["diff", str(tmp_path / "new.yaml"), "-o", str(tmp_path / "generated")],
               catch_exceptions=False).stdout
    assert text.index("[STRANDED] pool batch-l4 (old Karpenter nodes)") < text.index("[REPLACE] NodePool batch-l4")
    assert "  pool batch-l4: nodes stranded (Karpenter)," in text
    md = run(cli, ["plan", str(tmp_path / "new.yaml"), "--base", str(tmp_path / "old.yaml"), "--format", "markdown"],
             catch_exceptions=False).stdout
    assert md.index("| **stranded** | pool batch-l4 (old Karpenter nodes) |") < md.index(
        "| **replace** | NodePool batch-l4")
    assert "Nodes by pool, riskiest first: pool batch-l4: nodes stranded (Karpenter)" in md
