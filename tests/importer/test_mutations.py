"""Mutation test of `gpuplan import`: every field of a realistic export, replaced by a
value of another type, gives diagnostics (exit 0 or 1), never an exception or exit 4.

The fixtures are the examples' own cluster snapshots (tests/importer/snapshot.py) plus
the GPU Operator's ClusterPolicy and Deployment. Field paths are de-duplicated by
(kind, path with list indices folded), so the nodes of a pool count once; each path gets
two of the replacement values, rotating so that every value meets every kind of field
(the whole table would take minutes). The compiler's build of the draft and the draft's
rendering are memoised by their input: a mutation that leaves the draft as it was does
not build it again."""

from __future__ import annotations

import copy
import functools
import json

import pytest
from click.testing import CliRunner

from gpuplan.exitcodes import ExitCode
from gpuplan.importer.pipeline import import_objects
from gpuplan.importer.read import Obj, read_inputs
from tests.conftest import replaced
from tests.importer.snapshot import REPO, dump, snapshot

BIG = object()  # 10**5000 written as an integer in the YAML/JSON text
VALUES = (None, 0, "x", [], {}, True, BIG)
PER_PATH = 2
OPERATOR = [
    {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
     "spec": {"devicePlugin": {"config": {"name": "gpuplan-device-plugin-config", "default": "gpuplan.default"}},
              "mig": {"strategy": "single"}, "driver": {"enabled": False}, "toolkit": {"enabled": False},
              "dcgmExporter": {"enabled": True}},
     "status": {"state": "ready", "namespace": "gpu-operator"}},
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "gpu-operator", "namespace": "gpu-operator", "labels": {"app": "gpu-operator"}},
     "spec": {"replicas": 1, "template": {"spec": {"containers": [
         {"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v25.3.0",
          "resources": {"limits": {"cpu": "500m", "memory": "350Mi"}, "requests": {"cpu": "200m"}}}]}}}},
]
FIXTURES = {"dra": ("dra.yaml", REPO / "tests/golden/dra"), "kueue": ("kueue.yaml", REPO / "tests/golden/kueue")}


def _paths(v, p=()):
    if p:
        yield p
    if isinstance(v, dict):
        for k, x in v.items():
            if k != "managedFields":  # the API server's bookkeeping: dropped before anything reads it
                yield from _paths(x, p + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, p + (i,))


def _mutations(objs: list[Obj]) -> list[tuple[int, tuple, object]]:
    """(object index, field path, replacement), deterministic."""
    seen: set = set()
    paths = []
    for i, o in enumerate(objs):
        for p in _paths(o.data):
            key = (o.api_group, o.kind, tuple("[]" if isinstance(x, int) else x for x in p))
            if key not in seen:
                seen.add(key)
                paths.append((i, p))
    return [(i, p, VALUES[(n + j) % len(VALUES)]) for n, (i, p) in enumerate(paths) for j in range(PER_PATH)]


@pytest.fixture
def memoised(monkeypatch):
    """The draft's build and rendering, memoised by their input (both are pure)."""
    import gpuplan.importer.emit as emit
    import gpuplan.importer.roundtrip as roundtrip
    import gpuplan.output.objdiff as objdiff

    build = functools.lru_cache(maxsize=32)(roundtrip.build_draft)
    monkeypatch.setattr(roundtrip, "build_draft", build)
    trees: dict = {}
    tree_objects = objdiff.tree_objects

    def tree(files):
        key = frozenset(files.items())
        if key not in trees:
            trees[key] = tree_objects(files)
        return trees[key]

    monkeypatch.setattr(objdiff, "tree_objects", tree)
    texts: dict = {}
    render = emit.render

    def cached_render(draft):
        key = json.dumps([draft.spec, sorted((repr(k), repr(v)) for k, v in draft.notes.items()), draft.header],
                         sort_keys=True, default=repr)
        if key not in texts:
            texts[key] = render(draft)
        return texts[key]

    monkeypatch.setattr(emit, "render", cached_render)


def _fixture(name: str) -> list[dict]:
    return snapshot(*FIXTURES[name])["items"] + copy.deepcopy(OPERATOR)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_field_of_the_wrong_type_is_a_diagnostic(name, memoised):
    items = _fixture(name)
    read = read_inputs(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert not read.diagnostics
    objs = read.objects
    base = import_objects(objs)
    assert base.text is not None and base.round_trip.built, base.diagnostics  # the mutations reach every stage
    failures = []
    runs = 0
    for i, path, value in _mutations(objs):
        if value is BIG:
            continue  # in the text: test_huge_integer_in_the_text
        o = objs[i]
        mutated = objs[:i] + [Obj(replaced(o.data, path, value), o.file, o.manifest, o.path)] + objs[i + 1:]
        runs += 1
        try:
            import_objects(mutated)
        except Exception as exc:  # noqa: BLE001 - the finding is the exception itself
            failures.append(f"{o.kind} {o.namespace}/{o.name} {path} = {value!r}: {type(exc).__name__}: {exc}")
    assert runs > 300
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_huge_integer_in_the_text(name, tmp_path):
    """10**5000 as a YAML/JSON integer literal, once per kind: the reader refuses the file (exit 1)."""
    from gpuplan.cli.main import cli

    items = _fixture(name)
    objs = read_inputs(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items})).objects
    assert [o.data for o in objs] == items  # objs[i] is items[i]
    by_kind: dict = {}
    for i, path, value in _mutations(objs):
        if value is BIG:
            by_kind.setdefault((objs[i].api_group, objs[i].kind), (i, path))
    assert len(by_kind) >= 8
    runner = CliRunner()
    for (group, kind), (index, path) in sorted(by_kind.items()):
        doc = copy.deepcopy(items)
        doc[index] = replaced(doc[index], path, "@@BIG@@")
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": doc}).replace('"@@BIG@@"', "1" + "0" * 5000)
        for fmt, body in (("json", text), ("yaml", "# kubectl -o yaml\n" + text)):
            f = tmp_path / f"cluster.{fmt}"
            f.write_text(body)
            res = runner.invoke(cli, ["import", str(f)])
            assert res.exception is None or isinstance(res.exception, SystemExit), (kind, path, res.exception)
            assert res.exit_code == ExitCode.INVALID, (kind, path, res.exit_code, res.output[-500:])
            assert "GP830" in res.output, (kind, path)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_cli_exit_codes_on_mutated_exports(name, tmp_path):
    """A sample of the mutations through the command line: 0 or 1, never 4."""
    from gpuplan.cli.main import cli

    items = _fixture(name)
    objs = read_inputs(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items})).objects
    assert [o.data for o in objs] == items  # objs[i] is items[i]
    sample = [m for m in _mutations(objs) if m[2] is not BIG][::97]
    runner = CliRunner()
    f = tmp_path / "cluster.json"
    for i, path, value in sample:
        doc = copy.deepcopy(items)
        doc[i] = replaced(doc[i], path, value)
        f.write_bytes(dump({"apiVersion": "v1", "kind": "List", "items": doc}))
        res = runner.invoke(cli, ["import", str(f)])
        assert res.exception is None or isinstance(res.exception, SystemExit), (path, value, res.exception)
        assert res.exit_code in (ExitCode.OK, ExitCode.INVALID), (path, value, res.exit_code)
