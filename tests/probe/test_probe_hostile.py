"""A compromised node's ConfigMap, and planted temp-file symlinks: the fleet's
good nodes are still written, the bad node is reported by name, and nothing
outside the output directory is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import finishes
from probe_support import REPO, fixture_path, probe_fixture
from gpuplan.probe.inventory import dump_yaml
from gpuplan.probe.publish import configmap_body
from gpuplan.probe.pull import inventories_from_list, write_inventories
from test_probe_pull import _items, _pull, _setup


def _alias_bomb(levels: int = 40) -> str:
    """~2 KiB that a naive loader expands to 2**40 values."""
    lines = ["apiVersion: gpuplan.dev/v1alpha1", "kind: NodeInventory", "metadata: {name: evil-01}",
             "probe: {version: '1'}", "system: {hostname: evil-01}", 'l0: &l0 ["x", "x"]']
    lines += [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _hostile(name: str, text: str) -> dict:
    cm = configmap_body(name, "gpuplan-system", "placeholder")
    cm["data"]["inventory.yaml"] = text
    return cm


@pytest.mark.slow
def test_alias_bomb_configmap_among_good_ones_is_reported_and_good_nodes_are_written(tmp_path):
    items = _items()
    bomb = _hostile("evil-01", _alias_bomb())
    deep = _hostile("evil-02", "metadata: " + "[" * 100_000 + "]" * 100_000 + "\n")
    big = _hostile("evil-03", "a: " + "x" * (2 * 1024 * 1024) + "\n")
    env = _setup(tmp_path, [items[0], bomb, items[1], deep, big, items[2]])
    r = _pull(env, "-o", "inv", cwd=tmp_path)  # was: past 4 GB of memory and no file written
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in (tmp_path / "inv").iterdir())
    assert files == ["dgx-h100-01.yaml", "gpu-worker-05.yaml", "ip-10-0-1-23.ec2.internal.yaml"]
    err = r.stderr
    assert "gpuplan-system/inventory-evil-01 (node 'evil-01'): not a valid NodeInventory" in err
    assert "aliases expand to more than" in err
    assert "gpuplan-system/inventory-evil-02 (node 'evil-02')" in err and "nesting deeper than" in err
    assert "gpuplan-system/inventory-evil-03 (node 'evil-03')" in err and "larger than 1024 KiB" in err
    assert "3 nodes: 3 written" in err
    assert "Traceback" not in err


def test_hostile_configmap_values_cannot_forge_log_lines():
    cm = _hostile("evil-04", "x")
    cm["metadata"]["annotations"]["gpuplan.dev/node"] = "evil\n::warning::all nodes valid"
    cm["data"]["inventory.yaml"] = "kind: [\n::error::forged\n"
    invs, warnings = inventories_from_list({"items": [cm]})
    assert invs == [] and len(warnings) == 1
    assert "\n" not in warnings[0] and "\\n::warning::all nodes valid" in warnings[0]


def test_pull_writes_through_no_planted_temp_file_symlink(tmp_path):
    inv, _ = probe_fixture("t4")
    out = tmp_path / "inv"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    # the names the writer used to use, and any a guesser might try
    for name in (f".{inv.metadata.name}.yaml.tmp", f"{inv.metadata.name}.yaml.tmp"):
        os.symlink(victim, out / name)
    res = write_inventories(out, [inv])
    assert victim.read_text() == "precious"
    assert [p.name for p in res.written] == [f"{inv.metadata.name}.yaml"]
    assert (out / f"{inv.metadata.name}.yaml").read_text() == dump_yaml(inv)
    # a symlink planted at the file's own name is replaced, not written through
    target = out / f"{inv.metadata.name}.yaml"
    target.unlink()
    os.symlink(victim, target)
    write_inventories(out, [inv])
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and target.read_text() == dump_yaml(inv)


def test_probe_output_writes_through_no_planted_temp_file_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / ".node.yaml.tmp")
    r = subprocess.run([sys.executable, "-m", "gpuplan", "probe", "--fake", str(fixture_path("t4")),
                        "-o", str(tmp_path / "node.yaml")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert (tmp_path / "node.yaml").read_text().startswith("apiVersion: gpuplan.dev/v1alpha1\nkind: NodeInventory\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".node.yaml.tmp", "node.yaml", "victim.txt"]


def test_inventory_file_alias_bomb_and_fifo_are_reported_and_good_files_still_load(tmp_path):
    from gpuplan.probe.reader import load_inventory

    inv, _ = probe_fixture("t4")
    (tmp_path / "good.yaml").write_text(dump_yaml(inv))
    (tmp_path / "bomb.yaml").write_text(_alias_bomb())
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    os.mkfifo(tmp_path / "fifo.yaml")
    invs, diags = finishes(lambda: load_inventory([tmp_path]))  # the FIFO is never opened for reading
    assert [i.metadata.name for i in invs] == [inv.metadata.name]
    by_file = {os.path.basename(d.file): (d.code, d.message) for d in diags}
    assert by_file["bomb.yaml"][0] == "GP702" and "aliases expand" in by_file["bomb.yaml"][1]
    assert by_file["deep.json"][0] == "GP702" and "nesting deeper" in by_file["deep.json"][1]
    assert by_file["fifo.yaml"][0] == "GP701" and "FIFO" in by_file["fifo.yaml"][1]


def test_every_pull_problem_is_one_line_naming_its_configmap():
    items = [_hostile(f"n{i}", text) for i, text in enumerate([
        "{", "[]", "apiVersion: v1\nkind: ConfigMap\n", json.dumps({"a": 1}), "a: 1\n---\nb: 2\n"])]
    invs, warnings = inventories_from_list({"items": items})
    assert invs == [] and len(warnings) == 5
    for i, w in enumerate(warnings):
        assert w.startswith(f"gpuplan-system/inventory-n{i} (node 'n{i}'): ") and "\n" not in w
