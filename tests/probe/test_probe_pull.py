"""`gpuplan inventory pull` with a fake kubectl first on PATH."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from probe_support import REPO, probe_fixture
from gpuplan.probe.inventory import dump_yaml
from gpuplan.probe.reader import load_inventory
from gpuplan.probe.publish import configmap_body

FAKE_KUBECTL = """#!{python}
import json, os, sys
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
mode = os.environ.get("FAKE_KUBECTL_MODE", "ok")
if mode == "fail":
    sys.stderr.write("E0101 memcache.go:265] couldn't get current server API group list\\n")
    sys.stderr.write("error: You must be logged in to the server (Unauthorized)\\n")
    sys.exit(1)
if mode == "garbage":
    print("this is not json")
    sys.exit(0)
if "nodes" in sys.argv[1:]:
    if not os.environ.get("FAKE_KUBECTL_NODES"):
        sys.stderr.write('Error from server (Forbidden): nodes is forbidden\\n')
        sys.exit(1)
    sys.stdout.write(open(os.environ["FAKE_KUBECTL_NODES"]).read())
    sys.exit(0)
sys.stdout.write(open(os.environ["FAKE_KUBECTL_LIST"]).read())
"""


def _setup(tmp_path, items):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    k = bindir / "kubectl"
    k.write_text(FAKE_KUBECTL.format(python=sys.executable))
    k.chmod(k.stat().st_mode | stat.S_IXUSR)
    listing = tmp_path / "list.json"
    listing.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    env = dict(os.environ)
    env.update({
        "PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        "FAKE_KUBECTL_LOG": str(tmp_path / "argv.log"),
        "FAKE_KUBECTL_LIST": str(listing),
    })
    env.pop("GPUPLAN_KUBECTL", None)
    return env


def _pull(env, *args, cwd):
    return subprocess.run([sys.executable, "-m", "gpuplan", "inventory", "pull", *args], capture_output=True,
                          text=True, env={**env, "PYTHONPATH": str(REPO)}, cwd=cwd, timeout=120)


def _items():
    out = []
    for name in ("t4", "a100-mig", "h100-sxm-8x"):
        inv, _ = probe_fixture(name)
        out.append(configmap_body(inv.metadata.name, "gpuplan-system", dump_yaml(inv)))
    return out


@pytest.mark.slow
def test_pull_writes_one_file_per_node_deterministically(tmp_path):
    items = _items()
    # a ConfigMap whose annotation names another node is not trusted
    forged = json.loads(json.dumps(items[0]))
    forged["metadata"]["name"] = "inventory-evil"
    forged["metadata"]["annotations"]["gpuplan.dev/node"] = "evil"
    env = _setup(tmp_path, items + [forged])
    r = _pull(env, "-o", "inv", "--context", "prod", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in (tmp_path / "inv").iterdir())
    assert files == ["dgx-h100-01.yaml", "gpu-worker-05.yaml", "ip-10-0-1-23.ec2.internal.yaml"]
    assert "does not match" in r.stderr and "3 written" in r.stderr
    argv = json.loads((tmp_path / "argv.log").read_text().splitlines()[0])
    assert argv == ["--context", "prod", "get", "configmaps", "--namespace", "gpuplan-system", "--selector",
                    "app.kubernetes.io/name=gpuplan-node-probe", "--output", "json", "--chunk-size=500"]
    invs, diags = load_inventory([tmp_path / "inv"])
    assert diags == [] and len(invs) == 3
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "inv").iterdir()}
    r = _pull(env, "-o", "inv", cwd=tmp_path)
    assert r.returncode == 0 and "0 written, 3 unchanged" in r.stderr
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "inv").iterdir()}
    assert after == before


@pytest.mark.slow
def test_pull_prunes_only_inventory_files(tmp_path):
    env = _setup(tmp_path, _items()[:1])
    out = tmp_path / "inv"
    out.mkdir()
    inv, _ = probe_fixture("a100-pcie-4x")
    (out / "gone-node.yaml").write_text(dump_yaml(inv))
    (out / "README.yaml").write_text("hand: written\n")
    r = _pull(env, "-o", "inv", "--prune", "--chunk-size", "100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.yaml", "ip-10-0-1-23.ec2.internal.yaml"]
    assert "--chunk-size=100" in (tmp_path / "argv.log").read_text()


@pytest.mark.slow
def test_pull_prune_drops_the_inventories_of_deleted_nodes(tmp_path):
    """The probe gets no cluster-wide rights (no owner reference to its Node),
    so a deleted node's ConfigMap stays; `pull --prune` reads the Node list
    and leaves such inventories out, saying how to remove the ConfigMap."""
    env = _setup(tmp_path, _items())
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [{"metadata": {"name": "gpu-worker-05"}},
                                                           {"metadata": {"name": "dgx-h100-01"}}]}))
    assert _pull(env, "-o", "inv", cwd=tmp_path).returncode == 0
    assert len(list((tmp_path / "inv").iterdir())) == 3
    r = _pull({**env, "FAKE_KUBECTL_NODES": str(nodes)}, "-o", "inv", "--prune", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "inv").iterdir()) == ["dgx-h100-01.yaml", "gpu-worker-05.yaml"]
    assert ("node 'ip-10-0-1-23.ec2.internal' is not in the cluster any more; skipped (remove the ConfigMap: "
            "kubectl delete configmap -n gpuplan-system inventory-ip-10-0-1-23.ec2.internal)") in r.stderr
    # without rights to list nodes: a warning, and nothing is dropped
    r = _pull(env, "-o", "inv", "--prune", cwd=tmp_path)
    assert r.returncode == 0 and "cannot list nodes" in r.stderr
    assert len(list((tmp_path / "inv").iterdir())) == 3


@pytest.mark.slow
def test_pull_as_json_reads_back_the_same_and_replaces_the_yaml_files(tmp_path):
    env = _setup(tmp_path, _items())
    out = tmp_path / "inv"
    assert _pull(env, "-o", "inv", cwd=tmp_path).returncode == 0
    yaml_invs, diags = load_inventory([out])
    assert diags == []
    (out / "notes.json").write_text('{"mine": true}\n')  # not an inventory: left alone
    r = _pull(env, "-o", "inv", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "3 written, 0 unchanged, 3 removed" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "dgx-h100-01.json", "gpu-worker-05.json", "ip-10-0-1-23.ec2.internal.json", "notes.json"]
    json_invs, diags = load_inventory([out / "dgx-h100-01.json", out / "gpu-worker-05.json",
                                       out / "ip-10-0-1-23.ec2.internal.json"])
    assert diags == [] and json_invs == yaml_invs
    r = _pull(env, "-o", "inv", "--format", "json", "--prune", cwd=tmp_path)
    assert "0 written, 3 unchanged, 0 removed" in r.stderr
    assert (out / "notes.json").exists()


@pytest.mark.slow
def test_kubectl_failure_is_one_clear_line(tmp_path):
    env = _setup(tmp_path, [])
    r = _pull({**env, "FAKE_KUBECTL_MODE": "fail"}, cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "gpuplan inventory pull: kubectl failed (exit 1): error: You must be logged in to the server (Unauthorized)"
    ]
    assert not (tmp_path / "inventory").exists()
    r = _pull({**env, "FAKE_KUBECTL_MODE": "garbage"}, cwd=tmp_path)
    assert r.returncode == 1 and "did not print JSON" in r.stderr


def test_kubectl_missing(tmp_path):
    env = _setup(tmp_path, [])
    env["PATH"] = str(tmp_path / "empty-bin")
    r = _pull(env, cwd=tmp_path)
    assert r.returncode == 1
    assert "kubectl not found on PATH" in r.stderr and "Traceback" not in r.stderr


def test_empty_namespace(tmp_path):
    env = _setup(tmp_path, [])
    r = _pull(env, "-n", "other", cwd=tmp_path)
    assert r.returncode == 0 and "no inventories published in namespace other" in r.stderr


def _renamed(item_index: int, node: str) -> dict:
    """The probe's ConfigMap of fixture ``item_index`` as published by ``node``."""
    inv, _ = probe_fixture(("t4", "a100-mig", "h100-sxm-8x")[item_index])
    inv = inv.model_copy(update={"metadata": inv.metadata.model_copy(update={"name": node})})
    return configmap_body(node, "gpuplan-system", dump_yaml(inv))


@pytest.mark.slow
def test_pull_writes_every_node_whatever_the_length_of_its_name(tmp_path):
    """A node name may have 253 characters; `<node>.yaml` then exceeds a file
    name's 255 bytes (and a 240-character one the temporary name beside it):
    the pull aborted at that node. Every node is written; the longest under a
    shortened name made from the name and its hash, the same on every pull."""
    longest = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253, a valid DNS subdomain
    long_240 = ".".join(["e" * 63, "f" * 63, "g" * 63, "h" * 48])
    items = _items() + [_renamed(0, longest), _renamed(1, long_240)]
    env = _setup(tmp_path, items)
    for fmt in ("yaml", "json"):
        r = _pull(env, "-o", "inv", "--format", fmt, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "5 written" in r.stderr and "Traceback" not in r.stderr
        names = sorted(p.name for p in (tmp_path / "inv").iterdir())
        assert len(names) == 5 and all(len(n.encode()) <= 255 for n in names)
        assert f"{long_240}.{fmt}" in names
        (short,) = [n for n in names if n.startswith("a" * 63)]
        assert short.endswith(f".{fmt}") and short != f"{longest}.{fmt}"
        invs, diags = load_inventory([tmp_path / "inv"])
        assert diags == [] and longest in {i.metadata.name for i in invs}
        r = _pull(env, "-o", "inv", "--format", fmt, "--prune", cwd=tmp_path)  # deterministic: nothing to do
        assert r.returncode == 0 and "0 written, 5 unchanged, 0 removed" in r.stderr, r.stderr
