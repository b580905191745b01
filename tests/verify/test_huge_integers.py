"""A huge integer in a tree given to `gpuplan verify` or `gpuplan verify-cluster --tree` is
GP830 at its file, never an internal error. A decimal integer of more than 4,300 digits is
refused as it is read (Python's int() limit); one written in another base (0x..., 0777...,
0b..., or YAML 1.1's sexagesimal 1:30:00) has no digit limit when read, and failed later,
wherever it was turned into text (a ValueError: exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplan.cli.main import cli
from tests.report.trees import build_example

HUGE = {
    "decimal": "9" * 5000,
    "hexadecimal": "0x" + "f" * 5000,
    "octal": "0" + "7" * 5000,  # YAML 1.1: a leading 0
    "binary": "0b" + "1" * 14000,
    "sexagesimal": "1" + ":59" * 2600,
}

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  weight: {n}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}
      requirements: []
"""


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _not_internal(r) -> None:
    assert r.exit_code != 4, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("how", sorted(HUGE))
def test_verify_names_the_file_of_a_huge_integer(tmp_path: Path, how: str):
    crd = tmp_path / "nodepool.yaml"
    crd.write_text(NODEPOOL.format(n=HUGE[how]), encoding="utf-8")
    core = tmp_path / "configmap.yaml"  # any field: a core kind's data
    core.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: b}}\ndata:\n  a: {HUGE[how]}\n",
                    encoding="utf-8")
    for f in (crd, core):
        r = _run("verify", str(f))
        _not_internal(r)
        assert r.exit_code == 1, r.output
        assert f"{f.as_posix()}:" in r.stderr and "error[GP830]" in r.stderr, r.stderr
        assert "no Kubernetes field holds a number this long" in r.stderr


def test_integers_as_large_as_a_cluster_takes_still_load():
    from gpuplan.verify.manifests import load_text

    docs, diags = load_text(f"a: {2**63 - 1}\nb: 0x{'f' * 16}\nc: 1:30:00\n", "x.yaml")
    assert not diags and docs[0].data == {"a": 2**63 - 1, "b": 2**64 - 1, "c": 5400}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("huge")
    build_example(root)
    (root / "live.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}), encoding="utf-8")
    return root


@pytest.mark.parametrize("how", ["decimal", "hexadecimal", "sexagesimal"])
def test_verify_cluster_names_the_tree_file_of_a_huge_integer(built: Path, tmp_path: Path, how: str):
    """The tree's device-plugin ConfigMap is read for the config names nodes may still carry:
    one that does not load is said (it was skipped without a word), not an internal error."""
    import shutil

    tree = tmp_path / "generated"
    shutil.copytree(built / "generated", tree)
    cm = tree / "gpu-operator" / "device-plugin-config.yaml"
    cm.write_text(cm.read_text(encoding="utf-8").replace("\ndata:\n", f"\ndata:\n  huge: {HUGE[how]}\n", 1),
                  encoding="utf-8")
    r = _run("verify-cluster", str(built / "fleet.yaml"), "--live", str(built / "live.json"), "--tree", str(tree))
    _not_internal(r)
    assert r.exit_code == 1, r.output
    assert f"{cm.as_posix()}:" in r.stderr and "error[GP830]" in r.stderr, r.stderr
    # the tree as built is read as before
    r = _run("verify-cluster", str(built / "fleet.yaml"), "--live", str(built / "live.json"),
             "--tree", str(built / "generated"))
    _not_internal(r)
    assert r.exit_code in (0, 6) and "GP830" not in r.output, r.output
