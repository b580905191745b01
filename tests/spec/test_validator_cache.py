"""The compiled-validator cache: same results as pydantic's own build, and a
cache file can make gpuplan do nothing but validate."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_core import SchemaValidator

from gpuplan.probe.inventory import NodeInventory
from gpuplan.spec import validator_cache as vc
from gpuplan.spec.loader import LoadError, load_file
from gpuplan.spec.models import Fleet

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SPECS = sorted((HERE / "valid").glob("*.yaml")) + sorted((HERE / "invalid").glob("*.yaml")) + sorted(
    (REPO / "examples").glob("*.yaml"))
NVML_FIXTURES = sorted((REPO / "tests" / "probe" / "fixtures").glob("*.yaml"))


def _outcome(validator, data):
    try:
        return "ok", validator.validate_python(data)
    except ValidationError as exc:
        return "error", exc.errors(include_url=False, include_context=False)  # ctx holds exception objects


def _round_trip(model) -> SchemaValidator:
    model.model_rebuild()
    cls, args = model.__pydantic_validator__.__reduce__()
    assert cls is SchemaValidator
    return SchemaValidator(*vc.loads(vc.dumps(args, model.__module__), model.__module__))


def test_cached_fleet_validator_agrees_with_pydantic_on_every_spec():
    cached = _round_trip(Fleet)
    seen = set()
    for path in SPECS:
        try:
            data = load_file(path).data
        except LoadError:
            continue
        if not isinstance(data, dict):
            continue
        fresh = _outcome(Fleet.__pydantic_validator__, data)
        assert _outcome(cached, data) == fresh, path.name
        seen.add(fresh[0])
    assert seen == {"ok", "error"}  # both paths were compared


def test_cached_inventory_validator_agrees_with_pydantic():
    from gpuplan.probe.collect import NvmlUnavailable, probe_node
    from gpuplan.probe.fake import load_fake

    cached = _round_trip(NodeInventory)
    assert NVML_FIXTURES
    compared = 0
    for path in NVML_FIXTURES:
        try:
            inv = probe_node(load_fake(path), node_name="n1", hostname="n1", version="0", source="fake")
        except NvmlUnavailable:
            continue  # the no-driver fixture yields no inventory
        data = inv.model_dump(by_alias=True, mode="json")
        fresh = _outcome(NodeInventory.__pydantic_validator__, data)
        assert fresh[0] == "ok"
        assert _outcome(cached, data) == fresh
        broken = {**data, "gpus": data["gpus"] + data["gpus"][:1]}  # a duplicate GPU index
        assert _outcome(cached, broken) == _outcome(NodeInventory.__pydantic_validator__, broken)
        compared += 1
    assert compared >= 5


def test_field_named_metadata_survives_metadata_stripping():
    schema = {"type": "model-fields", "metadata": {"js": 1},
              "fields": {"metadata": {"type": "model-field", "schema": {"type": "str"}, "metadata": {}}}}
    assert vc._without_metadata(schema) == {
        "type": "model-fields", "fields": {"metadata": {"type": "model-field", "schema": {"type": "str"}}}}


def test_store_then_load(tmp_path: Path):
    path = tmp_path / "c" / "Fleet-x.pickle"
    Fleet.model_rebuild()
    vc._store(path, Fleet, Fleet.__pydantic_validator__)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    loaded = vc._load(path, Fleet)
    data = load_file(REPO / "examples" / "fleet.yaml").data
    assert loaded is not None and loaded.validate_python(data) == Fleet.model_validate(data)


def test_storing_keeps_the_newest_few_files_per_model(tmp_path: Path):
    Fleet.model_rebuild()
    other = tmp_path / "NodeInventory-old.pickle"
    other.write_bytes(b"x")
    for i in range(vc._KEEP + 2):
        path = tmp_path / f"Fleet-{i}.pickle"
        vc._store(path, Fleet, Fleet.__pydantic_validator__)
        os.utime(path, ns=(i * 10**9, i * 10**9))  # distinct ages on coarse-mtime filesystems
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["Fleet-2.pickle", "Fleet-3.pickle", "Fleet-4.pickle", "Fleet-5.pickle",
                    "NodeInventory-old.pickle"]


class _System:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


@pytest.mark.parametrize("payload", [
    pickle.dumps(((_System(),), {}), protocol=2),  # a global (os.system) called with REDUCE
    pickle.dumps((eval, ("1",))),                   # any global but the empty containers
])
def test_hostile_globals_are_refused(tmp_path: Path, payload: bytes, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pickle.UnpicklingError):
        vc.loads(payload, Fleet.__module__)
    assert not (tmp_path / "PWNED").exists()


class _Ref(pickle.Pickler):
    def __init__(self, f, pid):
        super().__init__(f, protocol=5)
        self.pid = pid

    def persistent_id(self, obj):
        return self.pid if obj == "REF" else None


@pytest.mark.parametrize("pid", [
    "re.enum.bltns.eval",        # reachable through an imported module: not defined here
    "Fleet.__init__",            # dunder
    "Fleet.model_validate",      # a method pydantic defines, not this module
    "API_VERSION",               # data, not a class or function
    "nope",
    7,
])
def test_references_must_be_defined_in_the_models_module(pid):
    import io

    buf = io.BytesIO()
    _Ref(buf, pid).dump(({"type": "any", "f": "REF"},))
    with pytest.raises((pickle.UnpicklingError, AttributeError)):
        vc.loads(buf.getvalue(), Fleet.__module__)


def test_own_references_resolve():
    assert vc._resolve(Fleet.__module__, "Fleet") is Fleet
    assert vc._resolve(Fleet.__module__, "_dns_label").__name__ == "_dns_label"


def test_files_others_can_write_or_links_are_ignored(tmp_path: Path):
    good = tmp_path / "Fleet-good.pickle"
    Fleet.model_rebuild()
    vc._store(good, Fleet, Fleet.__pydantic_validator__)
    assert vc._load(good, Fleet) is not None
    shared = tmp_path / "Fleet-shared.pickle"
    shared.write_bytes(good.read_bytes())
    shared.chmod(0o666)
    assert vc._load(shared, Fleet) is None
    link = tmp_path / "Fleet-link.pickle"
    link.symlink_to(good)
    assert vc._load(link, Fleet) is None
    junk = tmp_path / "Fleet-junk.pickle"
    junk.write_bytes(b"not a pickle")
    junk.chmod(0o600)
    assert vc._load(junk, Fleet) is None


def test_cache_dir_settings(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", "")
    assert vc.cache_dir() is None
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", str(tmp_path))
    assert vc.cache_dir() == tmp_path
    monkeypatch.delenv("GPUPLAN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert vc.cache_dir() == tmp_path / "xdg" / "gpuplan"


def test_key_follows_the_model_source(tmp_path: Path, monkeypatch):
    src = tmp_path / "keyed_models.py"
    src.write_text("from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import keyed_models

    first = vc.cache_key(keyed_models.M)
    assert first and vc.cache_key(keyed_models.M) == first
    src.write_text("from pydantic import BaseModel\nclass M(BaseModel):\n    x: str\n")
    assert vc.cache_key(keyed_models.M) != first
    sys.modules.pop("keyed_models")


_PROBE = textwrap.dedent("""
    import sys
    import pydantic._internal._model_construction as mc
    built = []
    orig = mc.create_schema_validator
    mc.create_schema_validator = lambda *a, **k: built.append(a[3]) or orig(*a, **k)
    from gpuplan.compiler import check_fleet
    checked = check_fleet(sys.argv[1])
    assert checked.resolved is not None
    print(",".join(built) or "-")
""")


def _built_in_fresh_process(env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(REPO / "examples" / "fleet.yaml")],
                         env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_second_run_builds_no_validator(tmp_path: Path):
    env = {"GPUPLAN_CACHE_DIR": str(tmp_path / "cache")}
    assert _built_in_fresh_process(env) == "Fleet"
    assert [p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()] == ["Fleet"]
    assert _built_in_fresh_process(env) == "-"


def test_disabled_or_unwritable_cache_still_validates(tmp_path: Path):
    assert _built_in_fresh_process({"GPUPLAN_CACHE_DIR": ""}) == "Fleet"
    blocker = tmp_path / "a-file"  # a cache path under a file cannot be created, even by root
    blocker.write_text("")
    for _ in range(2):
        assert _built_in_fresh_process({"GPUPLAN_CACHE_DIR": str(blocker / "cache")}) == "Fleet"


@pytest.mark.parametrize("model,allowed", [
    (Fleet, set()),
    (NodeInventory, {"gpuplan.diagnostics", "gpuplan.spec.validator_cache", "gpuplan.probe.codes"}),
])
def test_model_modules_take_no_schema_values_from_other_gpuplan_modules(model, allowed):
    """The cache key hashes the model's own module only. A constant imported from
    another gpuplan module (a Literal's values, a pattern) would change the schema
    without changing the key, so such an import must first join the key."""
    import ast

    source = Path(sys.modules[model.__module__].__file__).read_text()
    imported = {node.module for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuplan")}
    imported |= {a.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
                 for a in node.names if a.name.startswith("gpuplan")}
    assert imported <= allowed, f"{model.__module__} imports {sorted(imported - allowed)}: extend cache_key"
