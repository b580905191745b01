"""`gpuplan schema`: the committed schemas are exactly its output."""

from __future__ import annotations

import json

import jsonschema
import pytest

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


@pytest.mark.slow
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


# --- editor help and the spec reference ----------------------------------------------


def _fleet_schema() -> dict:
    return json.loads((REPO / "schemas" / "fleet.schema.json").read_text())


def _objects(node, where="#"):
    """Every (pointer, schema) in `node` that declares properties."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield where, node
        for k, v in node.items():
            yield from _objects(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{where}/{i}")


def test_committed_spec_reference_is_current():
    r = run_gpuplan("schema", "--markdown")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (REPO / "docs" / "spec.md").read_text(), \
        "docs/spec.md is stale: run `gpuplan schema --markdown > docs/spec.md`"


def test_markdown_and_inventory_do_not_combine():
    r = run_gpuplan("schema", "--markdown", "--inventory")
    assert r.returncode == 2 and "--inventory" in r.stderr


def test_every_property_has_a_description():
    missing, total = [], 0
    for where, obj in _objects(_fleet_schema()):
        for key, prop in obj["properties"].items():
            total += 1
            if not prop.get("description", "").strip():
                missing.append(f"{where}/properties/{key}")
    assert total >= 100
    assert missing == []


def test_spec_reference_documents_every_property():
    text = (REPO / "docs" / "spec.md").read_text()
    schema = _fleet_schema()
    for name, obj in [("Fleet", schema), *schema["$defs"].items()]:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for key, prop in obj["properties"].items():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))
            assert prop["description"].replace("|", "\\|") in row, (name, key)


def _literal_values(annotation):
    """The values of a Literal inside Optional[...] / list[...], or None."""
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return list(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        if arg is not type(None):
            found = _literal_values(arg)
            if found:
                return found
    return None


def test_every_closed_set_is_an_enum():
    """Each field typed as a Literal (sharing modes, policies, capacity types, engines...)
    reaches the schema as an enum (or a const), with exactly the model's values."""
    from gpuplan.spec import models

    defs = _fleet_schema()["$defs"]
    checked = 0
    for name, schema in defs.items():
        model = getattr(models, name)
        for field_name, field in model.model_fields.items():
            values = _literal_values(field.annotation)
            if not values:
                continue
            prop = schema["properties"][field.alias or field_name]
            flat = json.dumps(prop)
            enum = prop.get("enum") or prop.get("items", {}).get("enum") or next(
                (s.get("enum") for s in prop.get("anyOf", []) if "enum" in s), None)
            if enum is None and len(values) == 1:
                enum = [prop.get("const")]
            assert enum == values, (name, field_name, flat)
            checked += 1
    assert checked >= 15
    sharing = defs["Pool"]["properties"]["sharing"]
    assert set(sharing["discriminator"]["mapping"]) == {"exclusive", "mig", "time-slicing", "mps"}


def test_examples_are_catalog_names_and_valid_values():
    from jsonschema import Draft202012Validator

    from gpuplan.catalog.gpus import all_gpus, resolve_gpu
    from gpuplan.cloud.aws import instance_types
    from gpuplan.codes import all_codes
    from gpuplan.mig.solver import check_layout
    from gpuplan.spec.models import _PROFILE

    schema = _fleet_schema()
    defs = schema["$defs"]
    # every example is a value the property itself accepts
    for where, obj in _objects(schema):
        for key, prop in obj["properties"].items():
            for sub, label in ((prop, "examples"), (prop.get("items"), "items"), (prop.get("propertyNames"), "keys")):
                for ex in (sub or {}).get("examples", ()):
                    if label == "keys":  # MIG profile names, as the model's validator reads them
                        assert _PROFILE.match(ex), (where, key, ex)
                    else:
                        assert not list(Draft202012Validator(dict(sub, **{"$defs": defs})).iter_errors(ex)), \
                            (where, key, ex)
    assert defs["Pool"]["properties"]["gpu"]["examples"] == [g.key for g in all_gpus()]
    assert all(resolve_gpu(x) is not None for x in defs["Pool"]["properties"]["gpu"]["examples"])
    profiles = {p.name for g in all_gpus() for p in g.profiles}
    assert set(defs["Tier"]["properties"]["profile"]["examples"]) == profiles
    assert set(defs["Mig"]["properties"]["layout"]["propertyNames"]["examples"]) == profiles
    for layout in defs["Mig"]["properties"]["layout"]["examples"]:
        assert check_layout("A100-SXM4-80GB", layout).ok, layout
    assert set(defs["Karpenter"]["properties"]["instanceTypes"]["items"]["examples"]) == set(instance_types())
    codes = defs["DisabledRule"]["properties"]["code"]["examples"]
    assert codes and set(codes) <= set(all_codes()) and not any(c.startswith(("GP0", "GP1")) for c in codes)
