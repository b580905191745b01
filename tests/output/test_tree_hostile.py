"""Reading an existing generated tree that a pull request wrote, or that
changes underneath: never through a symlink, never a whole oversized file,
never a crash (OSError) — a diagnostic instead. And the object diff reads
tree YAML through the bounded reader."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuplan.output import tree as tree_mod
from gpuplan.output.tree import RECORD_NAME, TreeCheck, TreeError, check_tree, read_tree, write_tree

OLD = {
    "kustomization.yaml": b"resources:\n- cluster/namespaces.yaml\n",
    "cluster/namespaces.yaml": b"---\nkind: Namespace\n",
    "pools/train/nodepool.yaml": b"---\nkind: NodePool\n",
}
NEW = {
    "kustomization.yaml": b"resources:\n- cluster/namespaces.yaml\n",
    "cluster/namespaces.yaml": b"---\nkind: Namespace\n",
}
SECRET = b"password ghp_SECRET\n"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    p = tmp_path / "repo" / "generated"
    assert write_tree(p, OLD).ok
    return p


def codes(diags) -> list[str]:
    return [d.code for d in diags]


def test_a_symlinked_tree_is_not_read(out: Path, tmp_path: Path) -> None:
    """`generated -> elsewhere` (or `-> /`): neither read nor walked."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(out, elsewhere)
    (elsewhere / "kustomization.yaml").write_bytes(SECRET)
    link = tmp_path / "repo" / "linked"
    link.symlink_to(elsewhere)
    with pytest.raises(TreeError) as exc:
        read_tree(link)
    assert exc.value.diagnostic.code == "GP807"
    with pytest.raises(TreeError) as exc:
        TreeCheck(link)
    assert exc.value.diagnostic.code == "GP807"


def test_recorded_file_replaced_by_a_symlink_is_never_read(out: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_bytes(SECRET)
    (out / "pools/train/nodepool.yaml").unlink()
    (out / "pools/train/nodepool.yaml").symlink_to(secret)
    c = check_tree(out, OLD)
    assert "pools/train/nodepool.yaml" in c.differing and b"ghp_" not in c.diff.encode()
    assert "pools/train/nodepool.yaml" not in read_tree(out)


def test_oversized_recorded_file_is_never_read(out: Path) -> None:
    """A 6 GiB sparse file (no disk cost): only its size is looked at."""
    with open(out / "pools/train/nodepool.yaml", "wb") as fh:
        fh.truncate(6 << 30)
    diags: list = []
    assert "pools/train/nodepool.yaml" not in read_tree(out, diags)
    assert codes(diags) == ["GP808"] and "file larger than 64 MiB" in diags[0].message
    c = check_tree(out, OLD)
    assert c.differing == ("pools/train/nodepool.yaml",) and "GP808" in codes(c.diagnostics)
    r = write_tree(out, NEW)  # refused like a hand edit: nothing changes
    assert codes(r.diagnostics) == ["GP808"] and os.path.getsize(out / "pools/train/nodepool.yaml") == 6 << 30
    r = write_tree(out, NEW, force=True)
    assert r.ok and "pools/train/nodepool.yaml" in r.removed and not (out / "pools/train/nodepool.yaml").exists()


def _after_scan(monkeypatch, change) -> list:
    """Run ``change()`` once, right after the tree is listed and before any
    file is read: a concurrent writer, deterministically."""
    real = tree_mod._scan
    done: list = []

    def scan(*a, **k):
        entries = real(*a, **k)
        if not done:
            done.append(True)
            change()
        return entries

    monkeypatch.setattr(tree_mod, "_scan", scan)
    return done


def test_file_gone_between_listing_and_reading(out: Path, monkeypatch) -> None:
    done = _after_scan(monkeypatch, lambda: (out / "pools/train/nodepool.yaml").unlink())
    c = check_tree(out, OLD)
    assert done and c.missing == ("pools/train/nodepool.yaml",) and "GP809" in codes(c.diagnostics)

    monkeypatch.undo()
    write_tree(out, OLD)
    done = _after_scan(monkeypatch, lambda: (out / "pools/train/nodepool.yaml").unlink())
    diags: list = []
    assert sorted(read_tree(out, diags)) == ["cluster/namespaces.yaml", "kustomization.yaml"]
    assert done and codes(diags) == ["GP809"]


def test_tree_swapped_by_a_concurrent_build_is_read_as_one_tree(out: Path, monkeypatch) -> None:
    """The tree listed is the tree read: its directory is held open, so
    files of the tree swapped in meanwhile are never mixed in."""
    def swap() -> None:
        write_tree(out.parent / "other", NEW)
        os.rename(out, out.parent / "moved-away")
        os.rename(out.parent / "other", out)

    done = _after_scan(monkeypatch, swap)
    c = check_tree(out, OLD)
    assert done and c.ok, c.diff  # compared with the old tree, whole


def test_unreadable_directory_is_a_diagnostic_not_a_crash(out: Path, monkeypatch) -> None:
    """EACCES on a directory of the tree (root ignores chmod, so the denial is
    simulated): a TreeError (GP804) for check and diff, a refusal for build."""
    real_open, real_scandir = os.open, os.scandir

    def denied(path) -> bool:
        return isinstance(path, (str, Path)) and os.fspath(path).rstrip("/").endswith("pools")

    def fake_open(path, *a, **k):
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, *a, **k)

    def fake_scandir(path="."):
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    with monkeypatch.context() as m:
        m.setattr(os, "open", fake_open)
        m.setattr(os, "scandir", fake_scandir)
        with pytest.raises(TreeError) as exc:
            check_tree(out, OLD)
        assert exc.value.diagnostic.code == "GP804" and "Permission denied" in exc.value.diagnostic.message
        with pytest.raises(TreeError):
            read_tree(out)
        r = write_tree(out, NEW)
        assert codes(r.diagnostics) == ["GP804"]
    assert sorted(read_tree(out)) == sorted(OLD)  # unchanged


# --- the object diff reads tree YAML bounded ---------------------------------------------

BOMB = textwrap.dedent("""\
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: train}
    x0: &x0 ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    x1: &x1 [*x0, *x0, *x0, *x0, *x0, *x0, *x0, *x0, *x0, *x0]
    x2: &x2 [*x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1]
    x3: &x3 [*x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2]
    x4: &x4 [*x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3]
    x5: &x5 [*x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4]
    x6: &x6 [*x5, *x5, *x5, *x5, *x5, *x5, *x5, *x5, *x5, *x5]
    x7: &x7 [*x6, *x6, *x6, *x6, *x6, *x6, *x6, *x6, *x6, *x6]
    x8: &x8 [*x7, *x7, *x7, *x7, *x7, *x7, *x7, *x7, *x7, *x7]
    spec: *x8
""")


def _bounded_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with 3 GiB of address space and a
    timeout: on a regression it fails alone instead of taking the machine."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)


@pytest.mark.parametrize("where", ["file", "embedded"])
def test_alias_bomb_in_the_old_tree_is_compared_as_text(where: str) -> None:
    code = textwrap.dedent(f"""
        from gpuplan.output.objdiff import diff_trees, render_markdown, render_text
        bomb = {BOMB!r}
        new = "apiVersion: karpenter.sh/v1\\nkind: NodePool\\nmetadata: {{name: train}}\\nspec: {{weight: 1}}\\n"
        if {where!r} == "embedded":
            cm = "apiVersion: v1\\nkind: ConfigMap\\nmetadata: {{name: dp}}\\ndata:\\n  config.yaml: |\\n"
            bomb = cm + "".join("    " + ln + "\\n" for ln in bomb.splitlines())
            new = cm + "".join("    " + ln + "\\n" for ln in new.splitlines())
        d = diff_trees({{"pools/train/nodepool.yaml": bomb.encode()}}, {{"pools/train/nodepool.yaml": new.encode()}})
        print(render_text(d)); print(render_markdown(d))
    """)
    r = _bounded_python(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pools/train/nodepool.yaml" in r.stdout


def test_huge_integer_in_the_old_tree_is_compared_as_text() -> None:
    from gpuplan.output.objdiff import diff_trees, render_text

    old = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {n: 1}\nx: " + b"9" * 5000 + b"\n"
    new = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {n: 1}\n"
    text = render_text(diff_trees({"a.yaml": old}, {"a.yaml": new}))
    assert "a.yaml" in text


def test_disruption_report_reads_configmap_payloads_bounded() -> None:
    """report/disruption parses the device-plugin and mig-parted payloads of
    the old tree: a bomb there is a config it cannot read, compared by name."""
    from gpuplan.output.objdiff import tree_objects
    from gpuplan.report.disruption import _configs, _objects

    payload = "".join("    " + ln + "\n" for ln in BOMB.splitlines()[3:])  # the anchors and the alias
    cm = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpuplan-mig-parted-config}\ndata:\n"
          "  config.yaml: |\n" + payload).encode()
    plugin, mig = _configs(_objects(tree_objects({"gpu-operator/mig-parted-config.yaml": cm})))
    assert plugin == {} and mig == {}
