"""Adding, renaming and removing a tenant namespace, under Argo CD and Flux (#27).

Each test builds a tree, changes the spec, builds again over that tree (as
`gpuplan build` does) and asks the delivery model (gpuplan.report.delivery) what
the engine applies, refuses, prunes, keeps or holds, and which hand steps the
change needs: none. Argo CD checks every object of a sync, prunes included,
against the live AppProject (argo-cd v3.5.1 controller/sync.go:647-669), so the
project must reach the cluster through Git and keep a removed namespace while the
root sync prunes it; a Namespace prune must not hold the root sync."""

from __future__ import annotations

from pathlib import Path

import yaml
from tests.outputkit import docs
from tests.rules.helpers import BASE, edit

from gpuplan.compiler import Options, compile_fleet
from gpuplan.output.objdiff import tree_objects
from gpuplan.output.tree import write_tree
from gpuplan.report.delivery import admits, outcome
from gpuplan.report.disruption import disruptions

BOOT = "delivery/bootstrap.yaml"
PROJECT = "delivery/project/appproject.yaml"
FLUX = ("    gitops:\n", "    gitops:\n      engine: flux\n")
MINE = ("    gitops:\n", "    gitops:\n      project: platform\n")

ALPHA_QUOTA = "        alpha-ns: {training: 8, serve: 8, notebooks: 16}\n"
TWO = edit(BASE, ALPHA_QUOTA, "        alpha-ns: {training: 8, serve: 8, notebooks: 8}\n"
           "    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {notebooks: 8}\n")
RENAMED = BASE.replace("alpha-ns", "alpha-team")


def _engine(text: str, change: tuple[str, str] | None) -> str:
    if change is None:
        return text
    assert change[0] in text
    return text.replace(*change, 1)


def _build(tmp_path: Path, text: str, *, retire_ns: frozenset[str] = frozenset()) -> dict[str, bytes]:
    """Build ``text`` over the tree in tmp_path/generated, write it, return its files."""
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "generated"
    c = compile_fleet(spec, out_dir=out, options=Options(retire_namespaces=retire_ns))
    assert c.files, [str(d) for d in c.diagnostics if d.is_error]
    files = dict(c.files)
    write_tree(out, files, force=True)
    return files


def _pair(tmp_path: Path, before: str, after: str, engine=None):
    old = _build(tmp_path, _engine(before, engine))
    new = _build(tmp_path, _engine(after, engine))
    return old, new, outcome(tree_objects(old), tree_objects(new))


def _names(refs, kind: str) -> set[str]:
    return {f"{r[2]}/{r[3]}" if r[2] else r[3] for r in refs if r[1] == kind}


def _project(files: dict[str, bytes]) -> dict:
    return next(d for d in docs(files[PROJECT]) if d["kind"] == "AppProject")


def _no_hand_step(old, new, o) -> None:
    assert o.hand_steps == [] and o.refused == [] and o.held == [] and not o.blocked
    assert old[BOOT] == new[BOOT]  # nothing to apply by hand
    assert not [d for d in disruptions(old, new) if d.severity == "hand-step"]


# --- Argo CD ---------------------------------------------------------------------------


def test_argocd_add_tenant_needs_no_hand_step(tmp_path):
    old, new, o = _pair(tmp_path, BASE, TWO)
    assert o.engine == "argocd"
    _no_hand_step(old, new, o)
    assert "beta-ns" in _names(o.applied, "Namespace")
    assert "beta-ns" in {r[2] for r in o.applied if r[1] == "ResourceQuota"}
    # the root may sync before the project Application: its beta-ns objects wait for the retry
    assert {r[2] for r in o.waits} == {"beta-ns"}
    # the project is in the tree, outside the root kustomization, and admits every root object
    project = _project(new)
    assert PROJECT.encode() not in new["kustomization.yaml"]
    assert b"AppProject" not in new[BOOT].split(b"kind: Application")[-1]
    root = yaml.safe_load(new["kustomization.yaml"])["resources"]
    for path in root:
        for d in docs(new[path]):
            ref = (d["apiVersion"].rpartition("/")[0], d["kind"], d["metadata"].get("namespace", ""),
                   d["metadata"]["name"])
            assert admits(project, ref) is None, (path, ref)


def test_argocd_project_is_synced_by_its_own_application(tmp_path):
    files = _build(tmp_path, BASE)
    boot = {d["kind"] + "/" + d["metadata"]["name"]: d for d in docs(files[BOOT])}
    admin, app = boot["AppProject/gpuplan-small-admin"], boot["Application/gpuplan-small-project"]
    assert app["spec"]["project"] == "gpuplan-small-admin"
    assert app["spec"]["source"]["path"].endswith("delivery/project")
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": False, "selfHeal": True}
    # the admin project admits the AppProject kind in the GitOps namespace and nothing else
    assert admin["spec"]["namespaceResourceWhitelist"] == [{"group": "argoproj.io", "kind": "AppProject"}]
    assert admin["spec"]["clusterResourceWhitelist"] == []
    assert admits(admin, ("argoproj.io", "AppProject", "argocd", "gpuplan-small")) is None
    assert admits(admin, ("", "Namespace", "", "alpha-ns")) is not None
    assert boot["Application/gpuplan-small"]["spec"]["project"] == "gpuplan-small"


def test_argocd_remove_tenant_prunes_its_objects_and_holds_nothing(tmp_path):
    old, new, o = _pair(tmp_path, TWO, BASE)
    _no_hand_step(old, new, o)
    assert _names(o.kept, "Namespace") == {"beta-ns"}
    # its GPU quota is kept like the namespace (never uncharged while its grant is revoked)
    assert {r[2] for r in o.pruned} <= {"beta-ns"} and _names(o.kept, "ResourceQuota") == {"beta-ns/gpuplan-gpus"}
    # the project keeps beta-ns so that the prune is admitted whichever Application syncs first
    project = _project(new)
    assert admits(project, ("", "ResourceQuota", "beta-ns", "q")) is None
    assert project["metadata"]["annotations"]["gpuplan.dev/kept-namespaces"] == "beta-ns"
    ns = next(d for d in disruptions(old, new) if d.subject == "Namespace beta-ns")
    assert "nothing is held" in ns.message and "NO later change" not in ns.message
    # a fixed point: building again keeps it; retiring it drops it
    assert _build(tmp_path, BASE) == new
    retired = _build(tmp_path, BASE, retire_ns=frozenset({"beta-ns"}))
    assert admits(_project(retired), ("", "ResourceQuota", "beta-ns", "q")) is not None
    assert "annotations" not in _project(retired)["metadata"]


def test_argocd_rename_namespace(tmp_path):
    old, new, o = _pair(tmp_path, BASE, RENAMED)
    _no_hand_step(old, new, o)
    assert "alpha-team" in _names(o.applied, "Namespace")
    assert _names(o.kept, "Namespace") == {"alpha-ns"}
    assert {r[2] for r in o.pruned} <= {"alpha-ns"} and _names(o.kept, "ResourceQuota") == {"alpha-ns/gpuplan-gpus"}
    assert {r[2] for r in o.waits} == {"alpha-team"}
    dests = {d["namespace"] for d in _project(new)["spec"]["destinations"]}
    assert {"alpha-ns", "alpha-team"} <= dests


def test_argocd_namespace_is_never_pruned_nor_holds_the_sync(tmp_path):
    files = _build(tmp_path, BASE)
    ns = next(d for d in docs(files["tenants/alpha/namespaces.yaml"]) if d["kind"] == "Namespace")
    ann = ns["metadata"]["annotations"]
    assert set(ann["argocd.argoproj.io/sync-options"].split(",")) >= {"Prune=false", "Delete=false"}
    assert "Prune=confirm" not in ann["argocd.argoproj.io/sync-options"]
    assert ann["argocd.argoproj.io/compare-options"] == "IgnoreExtraneous"


def test_argocd_tree_from_before_the_project_application(tmp_path):
    """An old tree whose AppProject sat in bootstrap.yaml and whose Namespaces carried
    Prune=confirm: the new bootstrap is one hand step before merging, and a namespace
    removed in the same change still holds the root sync (its live annotation)."""
    old = _build(tmp_path, TWO)
    legacy = dict(old)
    legacy[BOOT] = old[PROJECT] + old[BOOT].split(b"# generated", 1)[1].split(b"\n", 1)[1]
    legacy[BOOT] = b"---\n" + b"\n---\n".join(
        yaml.safe_dump(d).encode() for d in docs(legacy[BOOT])
        if d["metadata"]["name"] not in ("gpuplan-small-admin", "gpuplan-small-project"))
    del legacy[PROJECT]
    for path, data in old.items():
        if path.endswith("namespaces.yaml"):
            legacy[path] = data.replace(b"Prune=false", b"Prune=confirm")
    new = _build(tmp_path, BASE)
    o = outcome(tree_objects(legacy), tree_objects(new))
    assert o.hand_steps and o.hand_steps[0].startswith("BEFORE merging, apply the new delivery/bootstrap.yaml")
    assert _names(o.held, "Namespace") == {"beta-ns"} and o.blocked
    assert "release the root sync" in o.hand_steps[-1]
    ds = disruptions(legacy, new)
    assert ds[0].severity == "hand-step"
    assert "NO later change" in next(d for d in ds if d.subject == "Namespace beta-ns").message


def test_argocd_own_project_asks_for_the_namespace(tmp_path):
    """With spec.cluster.gitops.project gpuplan writes no AppProject: a new namespace is a
    hand step on the person's project, first in the report."""
    old, new, o = _pair(tmp_path, BASE, TWO, MINE)
    assert PROJECT not in new and b"AppProject" not in new[BOOT]
    assert len(o.hand_steps) == 1 and "AppProject platform" in o.hand_steps[0] and "beta-ns" in o.hand_steps[0]
    assert disruptions(old, new)[0].severity == "hand-step"


# --- Flux ----------------------------------------------------------------------------------


def test_flux_add_rename_remove(tmp_path):
    for before, after, added, kept in ((BASE, TWO, "beta-ns", None), (TWO, BASE, None, "beta-ns"),
                                       (BASE, RENAMED, "alpha-team", "alpha-ns")):
        sub = tmp_path / f"{added}-{kept}"
        sub.mkdir()
        old, new, o = _pair(sub, before, after, FLUX)
        assert o.engine == "flux"
        _no_hand_step(old, new, o)
        assert o.waits == []  # no project
        if added:
            assert added in _names(o.applied, "Namespace")
        if kept:
            assert _names(o.kept, "Namespace") == {kept}
            assert {r[2] for r in o.pruned} <= {kept} and _names(o.kept, "ResourceQuota") == {f"{kept}/gpuplan-gpus"}
        else:
            assert o.kept == [] and o.pruned == []


def test_retire_namespace_on_the_command_line(tmp_path):
    from click.testing import CliRunner

    from gpuplan.cli.main import cli

    spec, out = tmp_path / "fleet.yaml", tmp_path / "generated"

    def build(text: str, *extra: str) -> dict:
        spec.write_text(text, encoding="utf-8")
        r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(out), *extra], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return next(d for d in docs((out / PROJECT).read_bytes()) if d["kind"] == "AppProject")

    build(TWO)
    assert "beta-ns" in {d["namespace"] for d in build(BASE)["spec"]["destinations"]}
    r = CliRunner().invoke(cli, ["check", str(spec), "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output  # the kept destination is a fixed point
    assert "beta-ns" not in {d["namespace"] for d in build(BASE, "--retire-namespace", "beta-ns")["spec"]["destinations"]}
