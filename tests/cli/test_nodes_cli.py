"""`gpuplan nodes`: the real entry point, its exit codes and its output file."""

from __future__ import annotations

import os

import yaml

from gpuplan.identity import POOL_LABEL
from gpuplan.provisioning.pools import autoscaled
from tests.conftest import REPO, run_gpuplan
from tests.report.helpers import resolved

FLEET = "examples/fleet.yaml"


def _items(text: str) -> list[dict]:
    doc = yaml.safe_load(text)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    return doc["items"]


def test_stdout_is_the_list_and_runs_agree():
    a = run_gpuplan("nodes", FLEET)
    b = run_gpuplan("nodes", FLEET)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stderr == ""
    names = [n["metadata"]["name"] for n in _items(a.stdout)]
    assert names == sorted(names) and all(n["kind"] == "Node" for n in _items(a.stdout))


def test_count_and_kwok(tmp_path):
    from gpuplan.compiler import check_fleet

    rf = check_fleet(REPO / FLEET).resolved
    r = run_gpuplan("nodes", FLEET, "--count", "2", "--kwok")
    assert r.returncode == 0, r.stderr
    items = _items(r.stdout)
    per_pool: dict[str, int] = {}
    for n in items:
        per_pool[n["metadata"]["labels"][POOL_LABEL]] = per_pool.get(n["metadata"]["labels"][POOL_LABEL], 0) + 1
        assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert n["metadata"]["labels"]["type"] == "kwok"
    for pv in rf.pools:
        assert per_pool.get(pv.name, 0) == (2 if autoscaled(pv.pool) else len(pv.pool.nodes or ()))


def test_output_file_is_written_atomically(tmp_path):
    out = tmp_path / "sub" / "nodes.yaml"
    r = run_gpuplan("nodes", FLEET, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert out.read_text(encoding="utf-8") == run_gpuplan("nodes", FLEET).stdout
    assert r.stderr.startswith(f"wrote {out} (")
    assert sorted(os.listdir(out.parent)) == ["nodes.yaml"]  # no temporary file left beside it


def test_output_replaces_a_symlink_without_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "nodes.yaml"
    out.symlink_to(victim)
    r = run_gpuplan("nodes", FLEET, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert not out.is_symlink() and _items(out.read_text(encoding="utf-8"))


def test_an_unwritable_output_exits_1(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    r = run_gpuplan("nodes", FLEET, "-o", str(blocker / "nodes.yaml"))
    assert r.returncode == 1
    assert r.stderr.startswith("gpuplan nodes: cannot write") and "Traceback" not in r.stderr


def test_an_invalid_spec_exits_1_with_its_diagnostics(tmp_path):
    text = (REPO / FLEET).read_text(encoding="utf-8").replace(
        "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", "layout: {3g.40gb: 3}")
    bad = tmp_path / "fleet.yaml"
    bad.write_text(text, encoding="utf-8")
    r = run_gpuplan("nodes", str(bad))
    assert r.returncode == 1
    assert r.stdout == ""
    assert "error[GP2" in r.stderr and "Traceback" not in r.stderr


def test_a_missing_spec_exits_1(tmp_path):
    r = run_gpuplan("nodes", str(tmp_path / "absent.yaml"))
    assert r.returncode == 1 and "error[GP010]" in r.stderr and r.stdout == ""


def test_usage_errors_exit_2():
    for args in (("--count", "-1"), ("--count", "many"), ("--bogus",)):
        r = run_gpuplan("nodes", FLEET, *args)
        assert r.returncode == 2, args
        assert "Traceback" not in r.stderr
    assert run_gpuplan("nodes").returncode == 2


def test_a_name_clash_exits_1(tmp_path):
    text = (REPO / FLEET).read_text(encoding="utf-8").replace(
        "nodes: [gpu-a100-07, gpu-a100-08]", "nodes: [burst-h100-0, gpu-a100-08]")
    resolved(tmp_path, text)  # the spec itself is valid
    r = run_gpuplan("nodes", str(tmp_path / "fleet.yaml"))
    assert r.returncode == 1
    assert "burst-h100-0" in r.stderr and r.stdout == ""


def test_help_lists_nodes():
    r = run_gpuplan("--help")
    assert "  nodes " in r.stdout
