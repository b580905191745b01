"""The old generated tree is attacker input (a pull request can edit it): what it keeps
(AppProject destinations, config names) reaches the next tree only where a previous build
could have written it (gpuplan.kept), and `check --base` / `diff --old` judge what the tree
keeps against the base branch's tree (GP811)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner
from tests.rules.helpers import BASE, edit

from gpuplan.cli.main import cli
from gpuplan.exitcodes import ExitCode
from gpuplan.identity import KEPT_CONFIGS_ANNOTATION, PROJECT_PATH
from gpuplan.lower.gitops import KEPT_NAMESPACES_ANNOTATION

TWO = edit(BASE, "  tenants:\n", "  tenants:\n    - {name: beta, namespaces: [beta-ns]}\n")
CM = "gpu-operator/device-plugin-config.yaml"


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _build(tmp_path: Path, text: str, *extra: str, out: str = "generated"):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    return _run("build", str(spec), "-o", str(tmp_path / out), *extra)


def _project(tree: Path) -> dict:
    return next(d for d in yaml.safe_load_all((tree / PROJECT_PATH).read_text(encoding="utf-8"))
                if d and d.get("kind") == "AppProject")


def _write_project(tree: Path, project: dict) -> None:
    (tree / PROJECT_PATH).write_text(yaml.safe_dump(project), encoding="utf-8")


def _dests(tree: Path) -> set[str]:
    return {d["namespace"] for d in _project(tree)["spec"]["destinations"]}


def _add_destinations(tree: Path, names, *, annotate: bool) -> None:
    p = _project(tree)
    p["spec"]["destinations"] += [{"server": "https://kubernetes.default.svc", "namespace": n} for n in names]
    if annotate:
        p["metadata"].setdefault("annotations", {})[KEPT_NAMESPACES_ANNOTATION] = ",".join(sorted(names))
    _write_project(tree, p)


def test_hand_added_destinations_are_not_kept(tmp_path):
    """kube-system and default, and any destination no object of the old tree lives in, added by
    hand to the old AppProject: the build drops them and says so (GP810); `check` fails."""
    assert _build(tmp_path, BASE).exit_code == 0
    tree = tmp_path / "generated"
    before = _dests(tree)
    _add_destinations(tree, ["kube-system", "default", "loot"], annotate=False)
    r = _run("check", str(tmp_path / "fleet.yaml"), "-o", str(tree))
    assert r.exit_code == ExitCode.STALE
    r = _build(tmp_path, BASE, "--force", "--format", "json")
    assert r.exit_code == 0, r.output
    assert _dests(tree) == before
    found = {d["message"].split("'")[1] for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP810"}
    assert found == {"kube-system", "default", "loot"}


def test_a_reserved_namespace_in_the_kept_annotation_is_not_kept(tmp_path):
    assert _build(tmp_path, BASE).exit_code == 0
    tree = tmp_path / "generated"
    before = _dests(tree)
    _add_destinations(tree, ["kube-system", "kube-flannel"], annotate=True)
    assert _build(tmp_path, BASE, "--force").exit_code == 0
    assert _dests(tree) == before
    assert KEPT_NAMESPACES_ANNOTATION not in (_project(tree)["metadata"].get("annotations") or {})


def test_twenty_thousand_hand_added_destinations_are_dropped(tmp_path):
    assert _build(tmp_path, BASE).exit_code == 0
    tree = tmp_path / "generated"
    before = _dests(tree)
    _add_destinations(tree, [f"ns-{i}" for i in range(20_000)], annotate=False)
    r = _build(tmp_path, BASE, "--force", "--format", "json")
    assert r.exit_code == 0
    assert _dests(tree) == before


def test_a_removed_tenants_namespace_is_kept_without_the_annotation(tmp_path):
    """The namespace a removed tenant leaves is kept (the old tree's Namespace object is the
    evidence a build wrote it), so the pending prune is admitted."""
    assert _build(tmp_path, TWO).exit_code == 0
    r = _build(tmp_path, BASE, "--format", "json")
    assert r.exit_code == 0
    assert "beta-ns" in _dests(tmp_path / "generated")
    assert not [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP810"]


def test_check_base_refuses_kept_state_the_base_tree_lacks(tmp_path):
    """A consistent hand edit (destination plus annotation) is a fixed point of the build, so
    `check` alone passes; against the base branch's tree it is a change (GP811), in `check --base`
    (exit 1) and first in `diff --old --format markdown`."""
    assert _build(tmp_path, BASE).exit_code == 0
    base = tmp_path / "base"
    shutil.copytree(tmp_path / "generated", base)
    tree = tmp_path / "generated"
    _add_destinations(tree, ["loot"], annotate=True)
    assert _build(tmp_path, BASE, "--force").exit_code == 0
    assert "loot" in _dests(tree)  # annotated: a build cannot tell it from a real kept namespace
    spec = str(tmp_path / "fleet.yaml")
    assert _run("check", spec, "-o", str(tree)).exit_code == 0
    r = _run("check", spec, "-o", str(tree), "--base", str(base), "--format", "json")
    assert r.exit_code == ExitCode.INVALID
    [d] = [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP811"]
    assert "'loot'" in d["message"] and d["hint"] == f"gpuplan build {spec} --retire-namespace loot"
    r = _run("diff", spec, "-o", str(tree), "--old", str(base), "--format", "markdown")
    assert r.exit_code == 0
    assert r.stdout.startswith("**Kept state the base tree does not have**") and "'loot'" in r.stdout
    # following the hint clears it
    assert _run("build", spec, "-o", str(tree), "--retire-namespace", "loot").exit_code == 0
    assert _run("check", spec, "-o", str(tree), "--base", str(base)).exit_code == 0
    # a real kept namespace is in the base tree: no finding
    assert _build(tmp_path, TWO).exit_code == 0
    shutil.rmtree(base)
    shutil.copytree(tree, base)
    assert _build(tmp_path, BASE).exit_code == 0
    assert "beta-ns" in _dests(tree)
    assert _run("check", spec, "-o", str(tree), "--base", str(base)).exit_code == 0


def test_check_base_refuses_a_kept_config_the_base_tree_lacks(tmp_path):
    from tests.lower.test_config_transitions import SLICED

    assert _build(tmp_path, SLICED).exit_code == 0
    base = tmp_path / "base"
    shutil.copytree(tmp_path / "generated", base)
    assert _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1)).exit_code == 0
    spec = str(tmp_path / "fleet.yaml")
    tree = str(tmp_path / "generated")
    # the name kept for old nodes is the base tree's config: no finding
    assert _run("check", spec, "-o", tree, "--base", str(base)).exit_code == 0
    # judged against a base without it (its kept name is new to the cluster)
    empty = tmp_path / "empty"
    r = _run("check", spec, "-o", tree, "--base", str(empty), "--format", "json")
    assert r.exit_code == ExitCode.INVALID
    found = [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP811"]
    assert found and all("--retire-config" in d["hint"] for d in found)


def test_a_deeply_nested_kept_annotation_is_no_crash(tmp_path):
    """200,000 `[` in the kept-configs annotation: not read (GP810), no exit 4 anywhere."""
    from tests.lower.test_config_transitions import SLICED

    assert _build(tmp_path, SLICED).exit_code == 0
    tree = tmp_path / "generated"
    cm = yaml.safe_load((tree / CM).read_text(encoding="utf-8"))
    cm["metadata"].setdefault("annotations", {})[KEPT_CONFIGS_ANNOTATION] = "[" * 200_000
    (tree / CM).write_text(yaml.safe_dump(cm, width=10**9), encoding="utf-8")
    spec = str(tmp_path / "fleet.yaml")
    for args in (("check", spec, "-o", str(tree)), ("diff", spec, "-o", str(tree)),
                 ("verify-cluster", spec, "--tree", str(tree), "--live", "-"),
                 ("build", spec, "-o", str(tree), "--force", "--format", "json")):
        r = CliRunner().invoke(cli, list(args), input='{"apiVersion": "v1", "kind": "List", "items": []}')
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
        assert r.exit_code not in (ExitCode.INTERNAL, ExitCode.REJECTED), (args, r.output)
    assert "GP810" in {d["code"] for d in json.loads(r.stdout)["diagnostics"]}


def test_retiring_a_name_the_tree_does_not_keep_is_a_warning(tmp_path):
    assert _build(tmp_path, TWO).exit_code == 0
    assert _build(tmp_path, BASE).exit_code == 0  # beta-ns kept
    r = _build(tmp_path, BASE, "--retire-namespace", "beta-nss", "--retire-namespace", "alpha-ns",
               "--retire-config", "nope-12345678", "--format", "json")
    assert r.exit_code == 0
    found = sorted(d["message"] for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP812")
    assert len(found) == 3
    assert any("alpha-ns" in m and "namespace of the spec" in m for m in found)
    r = _build(tmp_path, BASE, "--retire-namespace", "beta-ns", "--format", "json")
    assert not [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP812"]
    assert "beta-ns" not in _dests(tmp_path / "generated")


def test_an_update_rule_the_old_tree_trips_blames_the_old_tree(tmp_path):
    """A hand edit to the old tree (a NodePool turned static) makes the build's update rules refuse
    the change: exit 7, and the hints name the existing tree's object, not the spec."""
    text = (Path(__file__).resolve().parents[2] / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
    assert _build(tmp_path, text).exit_code == 0
    p = tmp_path / "generated" / "pools" / "infer-l40s" / "nodepool.yaml"
    docs = [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
    for d in docs:
        if d["kind"] == "NodePool":
            d["spec"]["replicas"] = 3
    p.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    r = _build(tmp_path, text, "--force", "--format", "json")
    assert r.exit_code == ExitCode.REJECTED
    diags = json.loads(r.stdout)["diagnostics"]
    [summary] = [d for d in diags if d["code"] == "GP850"]
    assert "existing tree" in summary["hint"] and "spec" not in summary["hint"]
    assert all("existing tree" in d["hint"] for d in diags if d["code"] == "GP840")
    # the same spec over a fresh tree: the spec is fine
    shutil.rmtree(tmp_path / "generated")
    assert _build(tmp_path, text).exit_code == 0
