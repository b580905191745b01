"""The old generated tree is hostile input: `gpuplan diff --old` (the pull-request report runs
it against the base branch's tree) and `gpuplan diff` (the tree at -o, which the pull request
edits) read it as the cluster's present state. An object of a type Kubernetes never gives it is
refused with GP839, naming the file, the object and the field (exit 1); no value in any field
ends in exit 4 or a traceback. `gpuplan check` reading a tree that a concurrent build swaps
meanwhile says which file it could not compare, and exits 1 or 3."""

from __future__ import annotations

import copy
import errno
import os
import shutil
import zlib
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from click.testing import CliRunner

from gpuplan.cli.main import cli
from tests.report.trees import build_example, diff, docs, write_docs

VALUES: list[Any] = [None, 0, "x", [], {}, True]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    build_example(root)
    return root


@pytest.fixture
def old(built: Path, tmp_path: Path) -> Path:
    out = tmp_path / "old"
    shutil.copytree(built / "generated", out)
    return out


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return copy.deepcopy(value)
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = copy.deepcopy(value)
    return doc


def _mutate(tree: Path, file: str, index: int, path: tuple, value: Any) -> None:
    d = docs(tree / file)
    d[index] = _set(d[index], path, value)
    write_docs(tree / file, d)


def _ok(r) -> None:
    """Not an internal error: a documented exit code, no exception, no traceback."""
    assert r.exit_code != 4, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output


NFR = "pools/train-a100/node-labels.yaml"
NODEPOOL = "pools/burst-h100/nodepool.yaml"
# (file, document, field, value, the field GP839 names)
WRONG = [
    (NFR, 0, ("metadata", "labels"), "x", "metadata.labels is a string"),
    (NFR, 0, ("metadata", "annotations", "argocd.argoproj.io/sync-wave"), 1, "is a number, not a string"),
    (NFR, 0, ("metadata", "labels", "gpuplan.dev/pool"), None, "is null, not a string"),
    (NFR, 0, ("spec",), [], "spec is a list, not a mapping"),
    (NFR, 0, ("spec", "rules"), "x", "spec.rules is a string, not a list"),
    (NFR, 0, ("spec", "rules"), None, "spec.rules is null"),
    (NFR, 0, ("spec", "rules", 0), 7, "spec.rules[0] is a number"),
    (NFR, 0, ("spec", "rules", 0, "labels", "nvidia.com/mig.config"), [], "is a list, not a string"),
    (NFR, 0, ("spec", "rules", 0, "taints"), None, "spec.rules[0].taints is null"),
    (NFR, 0, ("spec", "rules", 0, "matchFeatures"), True, "matchFeatures is a boolean"),
    (NFR, 0, ("spec", "rules", 0, "matchFeatures", 0, "matchExpressions", "nodename", "value"), [[1]],
     "nodename.value[0] is a list, not a string"),
    (NODEPOOL, 0, ("spec", "template"), None, "spec.template is null"),
    (NODEPOOL, 0, ("spec", "template", "metadata", "labels", "nvidia.com/device-plugin.config"), {},
     "is a mapping, not a string"),
    (NODEPOOL, 0, ("spec", "template", "spec"), 0, "spec.template.spec is a number"),
    (NODEPOOL, 0, ("spec", "disruption", "budgets"), "x", "spec.disruption.budgets is a string"),
    ("pools/burst-h100/ec2nodeclass.yaml", 0, ("spec",), None, "spec is null"),
    ("gpu-operator/values.yaml", 0, ("toolkit",), None, "toolkit is null"),
    ("gpu-operator/values.yaml", 0, ("driver",), "x", "driver is a string"),
    ("gpu-operator/nvidiadrivers.yaml", 0, ("spec",), None, "spec is null"),
    ("gpu-operator/device-plugin-config.yaml", 0, ("data",), [], "data is a list"),
    ("delivery/project/appproject.yaml", 0, ("spec", "destinations"), 5, "spec.destinations is a number"),
    (NFR, 0, ("kind",), "<img src=https://evil.example/x>", "is not a Kubernetes kind"),
    (NFR, 0, ("apiVersion",), "a b/v1", "is not a Kubernetes API version"),
    (NFR, 0, ("metadata", "name"), "x\r# heading", "holds a control character"),
]


@pytest.mark.parametrize("file,index,path,value,said", WRONG, ids=lambda x: None)
def test_a_field_of_the_wrong_type_in_the_old_tree_is_gp839(built, old, file, index, path, value, said):
    _mutate(old, file, index, path, value)
    r = diff(built / "fleet.yaml", old, "--format", "markdown")
    _ok(r)
    assert r.exit_code == 1, r.output
    assert "error[GP839]" in r.stderr and f"{file}:" in r.stderr and said in r.stderr, r.stderr
    assert r.stdout == ""  # no report from a tree that cannot be read


@pytest.mark.parametrize("file,index,path,value", [
    (NFR, 0, ("metadata",), []),  # not an object any more: compared as data
    (NFR, 0, ("kind",), {"a": 1}),
    (NFR, 0, (), "a scalar document"),
    (NFR, 0, (), [1, 2]),
    (NODEPOOL, 0, ("metadata", "name"), 5),
    ("kustomization.yaml", 0, ("resources",), {"a": None}),
    ("gpu-operator/values.yaml", 0, (), [1]),
], ids=lambda x: None)
def test_documents_that_are_not_objects_are_compared_as_data(built, old, file, index, path, value):
    _mutate(old, file, index, path, value)
    r = diff(built / "fleet.yaml", old, "--format", "markdown")
    _ok(r)
    assert r.exit_code == 0, r.output
    assert "**gpuplan diff**" in r.stdout


# --- every field of a real tree ------------------------------------------------------------------

# the files the readers of the old tree take (the disruption, transition and delivery models, the
# node-group back-ends); other files are compared as data, whatever their shape
READ = ("pools/", "gpu-operator/", "delivery/", "kustomization.yaml", "cluster/priorityclasses.yaml")


def _fields(v: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if len(path) >= 7:
        return
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _fields(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:2]):
            yield from _fields(x, path + (i,))


def _sample(tree: Path, share: int) -> list[tuple[str, int, tuple]]:
    """(file, document, field) of the tree's YAML files the readers take; a deterministic
    ``1/share`` of them (by a hash of the file and field)."""
    out = []
    for f in sorted(tree.rglob("*.yaml")):
        rel = f.relative_to(tree).as_posix()
        if not rel.startswith(READ):
            continue
        for i, d in enumerate(docs(f)):
            for p in _fields(d):
                if zlib.crc32(f"{rel}#{i}:{p}".encode()) % share == 0:
                    out.append((rel, i, p))
    return out


def test_no_value_in_any_field_of_the_old_tree_is_an_internal_error(built):
    """Fields × [None, 0, "x", [], {}, True] through what `gpuplan diff` runs on the old tree
    (the bounded reader, the disruption model, the object diff and both Markdown renderers), the
    new tree compiled once: each ends in a report or in GP839, nothing else."""
    from gpuplan.compiler import Options, compile_fleet
    from gpuplan.output import objdiff
    from gpuplan.output.tree import read_tree
    from gpuplan.report import disruption
    from gpuplan.report.transition import tier_needs
    from gpuplan.report.treeshape import TreeShapeError

    tree = built / "generated"
    compiled = compile_fleet(str(built / "fleet.yaml"), out_dir=str(tree), options=Options())
    new, needs = objdiff.tree_objects(compiled.files), tier_needs(compiled.resolved)
    files = read_tree(tree)
    sample = _sample(tree, 3)
    assert len(sample) > 150
    # the other files of the old tree, parsed once per mutated file
    others = {f: objdiff.tree_objects({p: v for p, v in files.items() if p != f}) for f, _, _ in sample}
    refused = reported = 0
    for file, index, path in sample:
        d = docs(tree / file)
        for value in VALUES:
            mutated = copy.deepcopy(d)
            mutated[index] = _set(mutated[index], path, value)
            try:
                a = {**objdiff.tree_objects({file: yaml.safe_dump_all(mutated).encode()}), **others[file]}
                ds = disruption.disruptions_of(a, new, needs)
                disruption.render_markdown(ds)
                objdiff.render_markdown(objdiff.diff_objects(a, new))
                reported += 1
            except TreeShapeError as exc:
                assert all(x.code == "GP839" and x.file == file for x in exc.diagnostics), exc.diagnostics
                refused += 1
            except Exception as exc:  # noqa: BLE001 - the failure names the mutation
                raise AssertionError(f"{file} document {index} {path} = {value!r}: {exc!r}") from exc
    assert refused and reported


def test_a_sample_of_mutated_old_trees_through_the_command(built, old):
    """The same, through `gpuplan diff --old` itself: a deterministic sample of the fields above."""
    sample = _sample(built / "generated", 15)
    assert len(sample) >= 25
    for n, (file, index, path) in enumerate(sample):
        value = VALUES[n % len(VALUES)]
        saved = (old / file).read_bytes()
        _mutate(old, file, index, path, value)
        r = diff(built / "fleet.yaml", old, "--format", "markdown")
        _ok(r)
        assert r.exit_code in (0, 1), (file, path, value, r.output)
        assert r.exit_code == 0 or "error[GP839]" in r.stderr, (file, path, value, r.output)
        (old / file).write_bytes(saved)


# --- a tree that changes while `gpuplan check` reads it ------------------------------------------


def _race(monkeypatch, tree: Path, rel: str, how: str) -> None:
    """Once `check` has listed the tree, ``rel`` is changed under it as a concurrent build would."""
    import gpuplan.output.tree as T

    listed = T._load_disk

    def then_change(fd, display):
        disk = listed(fd, display)
        p = tree / rel
        if how == "vanished":
            p.unlink()
        elif how == "directory":
            p.unlink()
            p.mkdir()
        elif how == "undecodable":
            p.write_bytes(b"\xff\xfe\x00 not UTF-8")
        elif how == "unreadable":  # as a file mode would (root reads every file): the open is refused
            real_open = T.os.open

            def refuse(path, flags, *a, **kw):
                if path == rel:
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
                return real_open(path, flags, *a, **kw)
            monkeypatch.setattr(T.os, "open", refuse)
        return disk
    monkeypatch.setattr(T, "_load_disk", then_change)


@pytest.mark.parametrize("rel", [NFR, ".gpuplan.sha256", "gpu-operator/device-plugin-config.yaml"])
@pytest.mark.parametrize("how", ["vanished", "directory", "undecodable", "unreadable"])
def test_check_names_a_file_that_changed_while_it_was_read(built, tmp_path, monkeypatch, rel, how):
    root = tmp_path / "repo"
    shutil.copytree(built, root)
    _race(monkeypatch, root / "generated", rel, how)
    r = CliRunner().invoke(cli, ["check", str(root / "fleet.yaml"), "-o", str(root / "generated")])
    _ok(r)
    assert r.exit_code in (1, 3), r.output
    assert rel in r.output, r.output
    said = {"vanished": "GP809", "directory": "GP808", "unreadable": "GP804", "undecodable": f"b/{rel}"}[how]
    assert said in r.output, r.output
