"""`gpuplan schema`: the committed schemas are exactly its output."""

from __future__ import annotations

import json

import jsonschema

from gpuplan.spec.loader import load_file
from tests.conftest import REPO, run_gpuplan


def test_committed_fleet_schema_is_current():
    r = run_gpuplan("schema")
    assert r.returncode == 0
    committed = (REPO / "schemas" / "fleet.schema.json").read_text()
    assert r.stdout == committed, "schemas/fleet.schema.json is stale: run `gpuplan schema > schemas/fleet.schema.json`"


def test_committed_inventory_schema_is_current():
    r = run_gpuplan("schema", "--inventory")
    assert r.returncode == 0
    assert r.stdout == (REPO / "schemas" / "inventory.schema.json").read_text()


def test_examples_validate_against_the_json_schema():
    schema = json.loads((REPO / "schemas" / "fleet.schema.json").read_text())
    for path in sorted((REPO / "examples").glob("*.yaml")):
        jsonschema.validate(load_file(path).data, schema)


def test_schema_rejects_unknown_keys_like_the_models():
    schema = json.loads((REPO / "schemas" / "fleet.schema.json").read_text())
    data = load_file(REPO / "examples" / "fleet.yaml").data
    data["spec"]["pools"][0]["replica"] = 4
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as exc:
        assert "replica" in exc.message
    else:
        raise AssertionError("schema accepted an unknown key")


def test_example_has_schema_modeline():
    first = (REPO / "examples" / "fleet.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/fleet.schema.json"
