"""Inventory files: schema currency, loading, and GP7xx diagnostics with positions."""

from __future__ import annotations

import json

from probe_support import SCHEMA_PATH, probe_fixture
from gpuplan.codes import Code
from gpuplan.diagnostics import Severity
from gpuplan.probe.codes import CODES
from gpuplan.probe.inventory import dump_yaml, inventory_json_schema, schema_text
from gpuplan.probe.reader import load_inventory


def test_committed_schema_is_current():
    assert SCHEMA_PATH.read_text() == json.dumps(inventory_json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_PATH.read_text() == schema_text()


def test_codes_are_gp70x_and_unique():
    assert all(isinstance(c, Code) for c in CODES)
    ids = [c.code for c in CODES]
    assert len(set(ids)) == len(ids) and all(i.startswith("GP70") for i in ids)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _codes(diags):
    return [(d.code, d.line) for d in diags]


def test_missing_file_and_empty_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    invs, diags = load_inventory([tmp_path / "nope.yaml", tmp_path / "empty"])
    assert invs == []
    assert [d.code for d in diags] == ["GP701", "GP706"]
    assert diags[1].severity is Severity.WARNING


def test_directory_loads_sorted_yaml_and_json(tmp_path):
    a, _ = probe_fixture("t4")
    b, _ = probe_fixture("a100-mig")
    _write(tmp_path, "b.yaml", dump_yaml(b))
    _write(tmp_path, "a.yml", dump_yaml(a))
    _write(tmp_path, "notes.txt", "ignored")
    invs, diags = load_inventory([tmp_path])
    assert diags == []
    assert [i.metadata.name for i in invs] == ["ip-10-0-1-23.ec2.internal", "gpu-worker-05"]


def test_syntax_error_has_a_position(tmp_path):
    p = _write(tmp_path, "x.yaml", "apiVersion: gpuplan.dev/v1alpha1\nkind: NodeInventory\nmetadata: {name: [\n")
    invs, diags = load_inventory([p])
    assert invs == [] and diags[0].code == "GP702" and diags[0].line is not None
    p = _write(tmp_path, "x.json", '{"apiVersion": ')
    _, diags = load_inventory([p])
    assert diags[0].code == "GP702" and diags[0].line == 1


def test_wrong_kind(tmp_path):
    p = _write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    _, diags = load_inventory([p])
    assert _codes(diags) == [("GP703", 2)]
    p = _write(tmp_path, "list.yaml", "- 1\n- 2\n")
    _, diags = load_inventory([p])
    assert diags[0].code == "GP703"


def test_unknown_key_points_at_the_line(tmp_path):
    inv, _ = probe_fixture("t4")
    text = dump_yaml(inv).replace("  memoryMiB: 15360\n", "  memoryMiB: 15360\n  memoryMB: 15360\n")
    p = _write(tmp_path, "t4.yaml", text)
    invs, diags = load_inventory([p])
    line = text.splitlines().index("  memoryMB: 15360") + 1
    assert invs == []
    assert [(d.code, d.line, d.col, d.path) for d in diags] == [("GP704", line, 3, "gpus[0].memoryMB")]
    assert "unknown key" in diags[0].message


def test_wrong_type_and_bad_topology(tmp_path):
    inv, _ = probe_fixture("a100-pcie-4x")
    text = dump_yaml(inv).replace("memoryMiB: 81920", "memoryMiB: lots", 1)
    _, diags = load_inventory([_write(tmp_path, "a.yaml", text)])
    assert [d.code for d in diags] == ["GP704"] and diags[0].path == "gpus[0].memoryMiB"
    text = dump_yaml(inv).replace("[X, PIX, SYS, SYS]", "[X, PIX, SYS]")
    _, diags = load_inventory([_write(tmp_path, "b.yaml", text)])
    assert [d.code for d in diags] == ["GP704"] and "4x4" in diags[0].message


def test_duplicate_node_and_multi_document_files(tmp_path):
    inv, _ = probe_fixture("t4")
    p = _write(tmp_path, "two.yaml", dump_yaml(inv) + "---\n" + dump_yaml(inv))
    invs, diags = load_inventory([p])
    assert len(invs) == 1
    assert [d.code for d in diags] == ["GP705"] and diags[0].line > 10


def test_probe_field_errors_become_warnings(tmp_path):
    inv, _ = probe_fixture("t4-refusing")
    p = _write(tmp_path, "r.yaml", dump_yaml(inv))
    invs, diags = load_inventory([p])
    assert len(invs) == 1
    assert [(d.code, d.severity) for d in diags] == [("GP707", Severity.WARNING)] * 2
    assert "GPU 2: ecc" in diags[0].message and diags[0].line is not None
