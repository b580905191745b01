"""write_tree / read_tree / check_tree: the swap never leaves a half-written
tree, stale files are pruned, a person's files and hand edits are safe."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuplan.output import tree as tree_mod
from gpuplan.output.tree import RECORD_NAME, check_tree, read_tree, record_bytes, recover, write_tree

OLD = {
    "kustomization.yaml": b"resources:\n- cluster/namespaces.yaml\n",
    "cluster/namespaces.yaml": b"---\nkind: Namespace\n",
    "pools/train/nodepool.yaml": b"---\nkind: NodePool\n",
    "pools/train/ec2nodeclass.yaml": b"---\nkind: EC2NodeClass\n",
}
NEW = {
    "kustomization.yaml": b"resources:\n- cluster/namespaces.yaml\n- tenants/vision/quota.yaml\n",
    "cluster/namespaces.yaml": b"---\nkind: Namespace\n",
    "tenants/vision/quota.yaml": b"---\nkind: ResourceQuota\n",
}


def snapshot(root: Path) -> dict[str, object]:
    """Everything under root: files → bytes, symlinks → ('link', target), dirs → 'dir'."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def generated(files: dict[str, bytes]) -> dict[str, object]:
    """The snapshot write_tree should leave for `files` with nothing else around."""
    out: dict[str, object] = dict(files)
    out[RECORD_NAME] = record_bytes(files)
    for p in files:
        parts = p.split("/")
        for i in range(1, len(parts)):
            out["/".join(parts[:i])] = "dir"
    return out


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "repo" / "generated"


def test_first_write_creates_tree_record_and_modes(out: Path) -> None:
    old_umask = os.umask(0o077)  # a strict umask must not leak into the tree
    try:
        r = write_tree(out, OLD)
    finally:
        os.umask(old_umask)
    assert r.ok and r.diagnostics == ()
    assert r.written == tuple(sorted(OLD)) and r.removed == () and r.unchanged == ()
    assert snapshot(out) == generated(OLD)
    for p in OLD:
        assert stat.S_IMODE((out / p).stat().st_mode) == 0o644
    assert stat.S_IMODE((out / "pools").stat().st_mode) == 0o755
    assert (out / RECORD_NAME).read_text().splitlines()[0].endswith("  cluster/namespaces.yaml")
    assert sorted(os.listdir(out.parent)) == ["generated"]  # no temp or backup left


def test_record_is_sha256sum_format_and_deterministic() -> None:
    rec = record_bytes({"b.yaml": b"b", "a/x.yaml": b""}).decode()
    assert rec == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a/x.yaml\n"
        "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.yaml\n"
    )


def test_rewrite_prunes_stale_files_and_empty_generated_dirs(out: Path) -> None:
    write_tree(out, OLD)
    r = write_tree(out, NEW)
    assert r.ok
    assert r.removed == ("pools/train/ec2nodeclass.yaml", "pools/train/nodepool.yaml")
    assert r.written == ("kustomization.yaml", "tenants/vision/quota.yaml")
    assert r.unchanged == ("cluster/namespaces.yaml",)
    assert snapshot(out) == generated(NEW)  # pools/ is gone with its files
    assert read_tree(out) == NEW


def test_unchanged_tree_is_left_alone(out: Path) -> None:
    write_tree(out, OLD)
    inode = out.stat().st_ino
    r = write_tree(out, OLD)
    assert r.ok and r.written == () and r.removed == () and r.unchanged == tuple(sorted(OLD))
    assert not r.changed
    assert out.stat().st_ino == inode


def test_person_files_survive_and_are_not_pruned(out: Path) -> None:
    write_tree(out, OLD)
    (out / "NOTES.md").write_text("mine\n")
    (out / "pools" / "train" / "extra.yaml").write_text("also mine\n")
    (out / "empty-dir-of-mine").mkdir()
    os.symlink("/etc/hostname", out / "link-to-outside")
    os.chmod(out / "NOTES.md", 0o600)
    r = write_tree(out, NEW)
    assert r.ok
    assert r.kept == ("NOTES.md", "link-to-outside", "pools/train/extra.yaml")
    snap = snapshot(out)
    assert snap["NOTES.md"] == b"mine\n"
    assert snap["pools/train/extra.yaml"] == b"also mine\n"
    assert snap["empty-dir-of-mine"] == "dir"
    assert snap["link-to-outside"] == ("link", "/etc/hostname")
    assert "pools/train/nodepool.yaml" not in snap  # the stale generated neighbour went
    assert stat.S_IMODE((out / "NOTES.md").stat().st_mode) == 0o600
    assert read_tree(out) == NEW  # the person's files are not "generated"


def test_hand_edited_file_is_refused_and_nothing_changes(out: Path) -> None:
    write_tree(out, OLD)
    (out / "cluster" / "namespaces.yaml").write_bytes(b"---\nkind: Namespace # my edit\n")
    before = snapshot(out)
    r = write_tree(out, NEW)
    assert not r.ok and r.written == () and r.removed == ()
    [d] = r.diagnostics
    assert d.code == "GP801" and d.severity.value == "error"
    assert d.file == f"{out}/cluster/namespaces.yaml"
    assert "edited by hand" in d.message
    assert snapshot(out) == before


def test_hand_edited_stale_file_is_not_deleted(out: Path) -> None:
    write_tree(out, OLD)
    (out / "pools" / "train" / "nodepool.yaml").write_bytes(b"edited\n")
    before = snapshot(out)
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP801"]
    assert "no longer produced" in r.diagnostics[0].message
    assert snapshot(out) == before


def test_force_overwrites_a_hand_edit(out: Path) -> None:
    write_tree(out, OLD)
    (out / "cluster" / "namespaces.yaml").write_bytes(b"edited\n")
    r = write_tree(out, NEW, force=True)
    assert r.ok and "cluster/namespaces.yaml" in r.written
    assert snapshot(out) == generated(NEW)


def test_hand_edit_equal_to_new_output_is_accepted(out: Path) -> None:
    write_tree(out, OLD)
    (out / "kustomization.yaml").write_bytes(NEW["kustomization.yaml"])
    r = write_tree(out, NEW)
    assert r.ok and "kustomization.yaml" in r.unchanged


def test_person_file_at_a_generated_path_is_not_clobbered(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "kustomization.yaml").write_text("mine\n")
    r = write_tree(out, NEW)
    [d] = r.diagnostics
    assert d.code == "GP802" and d.file == f"{out}/kustomization.yaml"
    assert snapshot(out) == {"kustomization.yaml": b"mine\n"}
    r = write_tree(out, NEW, force=True)
    assert r.ok and snapshot(out) == generated(NEW)


def test_person_file_where_a_generated_directory_goes(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "tenants").write_text("a file named like a directory\n")
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP802"]
    assert r.diagnostics[0].file == f"{out}/tenants"
    assert snapshot(out) == {"tenants": b"a file named like a directory\n"}


def test_person_directory_with_content_is_never_replaced(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "kustomization.yaml").mkdir()
    (out / "kustomization.yaml" / "keep").write_text("x")
    for force in (False, True):
        r = write_tree(out, NEW, force=force)
        assert [d.code for d in r.diagnostics] == ["GP802"]
        assert (out / "kustomization.yaml" / "keep").read_text() == "x"


def test_symlinked_directory_inside_the_tree_is_not_followed(out: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "quota.yaml").write_text("outside\n")
    out.mkdir(parents=True)
    os.symlink(outside, out / "tenants")
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP802"]
    r = write_tree(out, NEW, force=True)
    assert r.ok
    assert not (out / "tenants").is_symlink()
    assert (outside / "quota.yaml").read_text() == "outside\n"  # never written through
    assert sorted(os.listdir(outside)) == ["quota.yaml"]


def test_generated_file_replaced_by_symlink_is_kept_as_the_persons(out: Path, tmp_path: Path) -> None:
    write_tree(out, OLD)
    target = tmp_path / "secret"
    target.write_text("do not touch\n")
    (out / "pools" / "train" / "nodepool.yaml").unlink()
    os.symlink(target, out / "pools" / "train" / "nodepool.yaml")
    r = write_tree(out, NEW)
    assert r.ok and "pools/train/nodepool.yaml" in r.kept
    assert os.readlink(out / "pools" / "train" / "nodepool.yaml") == str(target)
    assert target.read_text() == "do not touch\n"


def test_malformed_record_is_refused(out: Path) -> None:
    write_tree(out, OLD)
    (out / RECORD_NAME).write_text("0" * 64 + "  ../../etc/passwd\n")
    before = snapshot(out)
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP803"]
    assert snapshot(out) == before
    with pytest.raises(tree_mod.TreeError):
        read_tree(out)


def test_repository_root_and_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    r = write_tree(tmp_path, NEW)
    assert [d.code for d in r.diagnostics] == ["GP804"]
    (tmp_path / "afile").write_text("x")
    r = write_tree(tmp_path / "afile", NEW)
    assert [d.code for d in r.diagnostics] == ["GP804"]


@pytest.mark.parametrize("bad", ["/abs.yaml", "../x.yaml", "a/../b", "a//b", "./a", "a\\b", RECORD_NAME, ""])
def test_invalid_paths_are_programming_errors(out: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        write_tree(out, {bad: b"x"})
    assert not out.exists()


def test_file_and_directory_at_one_path_is_an_error(out: Path) -> None:
    with pytest.raises(ValueError):
        write_tree(out, {"a": b"x", "a/b": b"y"})


def test_symlinked_output_dir_is_written_where_it_points(tmp_path: Path) -> None:
    real = tmp_path / "real"
    link = tmp_path / "generated"
    os.symlink("real", link)
    assert write_tree(link, NEW).ok
    assert link.is_symlink() and snapshot(real) == generated(NEW)


# ------------------------------------------------------------ failures and kills


def test_exception_half_way_leaves_old_tree_untouched(out: Path, monkeypatch) -> None:
    write_tree(out, OLD)
    (out / "mine.txt").write_text("mine")
    before = snapshot(out)
    calls = {"n": 0}
    real = tree_mod._write_file

    def flaky(path, data):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(tree_mod, "_write_file", flaky)
    r = write_tree(out, NEW)
    assert calls["n"] == 2
    assert [d.code for d in r.diagnostics] == ["GP804"] and "No space left" in r.diagnostics[0].message
    assert snapshot(out) == before
    assert sorted(os.listdir(out.parent)) == ["generated"]

    def boom(path, data):
        raise RuntimeError("bug")

    monkeypatch.setattr(tree_mod, "_write_file", boom)
    with pytest.raises(RuntimeError):
        write_tree(out, NEW)
    assert snapshot(out) == before
    assert sorted(os.listdir(out.parent)) == ["generated"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_failure_during_swap_keeps_the_old_tree(out: Path, monkeypatch, exchange: bool) -> None:
    write_tree(out, OLD)
    before = snapshot(out)
    if not exchange:
        monkeypatch.setattr(tree_mod, "_exchange", lambda a, b: False)
    real_rename = os.rename

    def failing_rename(src, dst):
        if Path(src).name.endswith(".gpuplan-new"):
            raise OSError(5, "I/O error")
        real_rename(src, dst)

    monkeypatch.setattr(tree_mod.os, "rename", failing_rename)
    if exchange:
        monkeypatch.setattr(tree_mod, "_exchange", lambda a, b: (_ for _ in ()).throw(OSError(5, "I/O error")))
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP804"]
    assert snapshot(out) == before
    assert sorted(os.listdir(out.parent)) == ["generated"]


# A child process that dies (os._exit, no cleanup at all) at a chosen point.
_KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from gpuplan.output import tree
    out, point, use_exchange = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    files = {NEW!r}
    if not use_exchange:
        tree._exchange = lambda a, b: False
    real_write, real_rename, real_rmtree = tree._write_file, os.rename, tree.shutil.rmtree
    n = {{"w": 0, "r": 0}}
    def write(path, data):
        n["w"] += 1
        if point == "build" and n["w"] == 2:
            os._exit(9)
        real_write(path, data)
    def rename(a, b):
        real_rename(a, b)
        n["r"] += 1
        if point == "between-renames" and n["r"] == 1:
            os._exit(9)
    def rmtree(p, *a, **k):
        if point == "before-cleanup":
            os._exit(9)
        real_rmtree(p, *a, **k)
    tree._write_file = write
    tree.os.rename = rename
    tree.shutil.rmtree = rmtree
    tree.write_tree(out, files)
    os._exit(0)
    """
).format(NEW=NEW)


@pytest.mark.parametrize(
    "point, use_exchange, expect_after_kill",
    [
        ("build", True, "old"),
        ("build", False, "old"),
        ("before-cleanup", True, "new"),
        ("between-renames", False, "missing"),
        ("before-cleanup", False, "new"),
    ],
)
def test_killed_writer_is_recovered(out: Path, point: str, use_exchange: bool, expect_after_kill: str) -> None:
    write_tree(out, OLD)
    (out / "mine.txt").write_text("mine")
    old_snap = snapshot(out)
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_SCRIPT, str(out), point, "1" if use_exchange else "0"],
        capture_output=True,
    )
    assert proc.returncode == 9, proc.stderr.decode()
    leftovers = sorted(os.listdir(out.parent))
    assert leftovers != ["generated"]  # the kill really left something behind
    new_snap = generated(NEW) | {"mine.txt": b"mine"}
    if expect_after_kill == "old":
        assert snapshot(out) == old_snap
    elif expect_after_kill == "new":
        assert snapshot(out) == new_snap
    else:
        assert not out.exists()  # between the two fallback renames

    # check/read never see a half tree; the next write recovers first.
    done = recover(out)
    assert done
    # the killed writer's (empty) lock file stays until the next write
    assert sorted(os.listdir(out.parent)) in (["generated"], [".generated.gpuplan-lock", "generated"])
    assert snapshot(out) == (new_snap if expect_after_kill == "new" else old_snap)
    r = write_tree(out, NEW)
    assert r.ok
    assert snapshot(out) == new_snap
    assert sorted(os.listdir(out.parent)) == ["generated"]


def test_write_tree_recovers_a_leftover_temp_dir_itself(out: Path) -> None:
    write_tree(out, OLD)
    junk = out.parent / ".generated.gpuplan-new"
    (junk / "half").mkdir(parents=True)
    (junk / "half" / "file.yaml").write_text("partial")
    assert write_tree(out, NEW).ok
    assert sorted(os.listdir(out.parent)) == ["generated"]
    assert snapshot(out) == generated(NEW)


def test_concurrent_writer_is_refused(out: Path) -> None:
    import fcntl

    out.parent.mkdir(parents=True)
    fd = os.open(out.parent / ".generated.gpuplan-lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = write_tree(out, NEW)
        assert [d.code for d in r.diagnostics] == ["GP804"]
        assert "another gpuplan" in r.diagnostics[0].message
        assert not out.exists()
    finally:
        os.close(fd)
    assert write_tree(out, NEW).ok


def test_builds_into_sibling_directories_do_not_refuse_each_other(out: Path) -> None:
    """The lock is the tree's own: another tree in the same parent is written
    while the first one's lock is held."""
    from gpuplan.output.tree import _locked

    out.parent.mkdir(parents=True)
    with _locked(out.resolve()) as got:
        assert got
        r = write_tree(out.parent / "generated-eu", NEW)
        assert r.ok and r.diagnostics == ()
        assert not write_tree(out, NEW).ok  # the held tree itself is refused
    assert write_tree(out, NEW).ok
    assert sorted(os.listdir(out.parent)) == ["generated", "generated-eu"]


# ------------------------------------------------------------------- check_tree


def test_check_identical_tree_is_ok(out: Path) -> None:
    write_tree(out, NEW)
    (out / "mine.txt").write_text("person files do not matter")
    r = check_tree(out, NEW)
    assert r.ok and r.diff == "" and r.missing == r.extra == r.differing == r.hand_edited == ()
    assert r.diagnostics == ()


def test_check_stale_tree_reports_missing_extra_and_differing(out: Path) -> None:
    write_tree(out, OLD)
    r = check_tree(out, NEW)
    assert not r.ok
    assert r.missing == ("tenants/vision/quota.yaml",)
    assert r.extra == ("pools/train/ec2nodeclass.yaml", "pools/train/nodepool.yaml")
    assert r.differing == (RECORD_NAME, "kustomization.yaml")
    assert r.hand_edited == ()
    assert "--- a/kustomization.yaml\n+++ b/kustomization.yaml\n" in r.diff
    assert "+- tenants/vision/quota.yaml\n" in r.diff
    assert "--- /dev/null\n+++ b/tenants/vision/quota.yaml\n@@ -0,0 +1,2 @@\n+---\n+kind: ResourceQuota\n" in r.diff
    assert "--- a/pools/train/nodepool.yaml\n+++ /dev/null\n" in r.diff
    assert {d.code for d in r.diagnostics} == {"GP805"}
    assert check_tree(out, NEW).diff == r.diff  # deterministic


def test_check_reports_hand_edits(out: Path) -> None:
    write_tree(out, NEW)
    (out / "cluster" / "namespaces.yaml").write_bytes(b"---\nkind: Namespace\nedited: true")
    r = check_tree(out, NEW)
    assert not r.ok
    assert r.differing == ("cluster/namespaces.yaml",)
    assert r.hand_edited == ("cluster/namespaces.yaml",)
    assert "+kind: Namespace\n" not in r.diff
    assert "-edited: true\n\\ No newline at end of file\n" in r.diff
    assert any(d.code == "GP801" for d in r.diagnostics)


def test_check_missing_tree(out: Path) -> None:
    r = check_tree(out, NEW)
    assert not r.ok and r.missing == tuple(sorted([*NEW, RECORD_NAME]))
    assert read_tree(out) == {}


# ---------------------------------------------------------------- leftovers


def _refuse_unlink(monkeypatch, victim: Path) -> None:
    """The OS refuses to delete this very file (its inode), as it does for a
    root-owned tree left by `sudo gpuplan build` when gpuplan runs as a user."""
    real = os.unlink
    st = os.lstat(victim)
    key = (st.st_dev, st.st_ino)

    def unlink(path, *a, dir_fd=None, **k):
        try:
            s2 = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            s2 = None
        if s2 is not None and (s2.st_dev, s2.st_ino) == key:
            raise PermissionError(1, "Operation not permitted", os.fsdecode(path))
        return real(path, *a, dir_fd=dir_fd, **k)

    monkeypatch.setattr(os, "unlink", unlink)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_undeletable_old_tree_is_reported_once_and_does_not_wedge_later_builds(out, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(tree_mod, "_exchange", lambda a, b: False)
    write_tree(out, OLD)  # as root, say
    _refuse_unlink(monkeypatch, out / "pools" / "train" / "nodepool.yaml")
    r = write_tree(out, NEW)
    assert r.ok  # the new tree is in place: not a failed build
    assert snapshot(out) == generated(NEW)
    (d,) = r.diagnostics
    assert d.code == "GP806" and d.severity.value == "warning"
    stale = [n for n in os.listdir(out.parent) if ".gpuplan-stale-" in n]
    assert len(stale) == 1 and stale[0].startswith(".generated.gpuplan-stale-")
    assert stale[0] in d.message and "sudo rm -rf " in d.hint and stale[0] in d.hint
    # later builds work and say nothing more about it
    for files in (OLD, NEW):
        r = write_tree(out, files)
        assert r.ok and r.diagnostics == ()
    assert sorted(os.listdir(out.parent)) == sorted(["generated", stale[0]])
    # once the file can be removed, the next build clears the remains quietly
    monkeypatch.undo()
    assert write_tree(out, OLD).ok
    assert sorted(os.listdir(out.parent)) == ["generated"]


def test_undeletable_leftover_of_an_earlier_version_does_not_wedge(out, monkeypatch):
    write_tree(out, OLD)
    junk = out.parent / ".generated.gpuplan-new" / "sub"
    junk.mkdir(parents=True)
    (junk / "root-owned.yaml").write_text("x")
    _refuse_unlink(monkeypatch, junk / "root-owned.yaml")
    assert write_tree(out, NEW).ok
    assert snapshot(out) == generated(NEW)
    assert not (out.parent / ".generated.gpuplan-new").exists()


def test_read_only_directory_in_the_old_tree_is_removed(out):
    write_tree(out, OLD)
    ro = out / "mine"
    ro.mkdir()
    (ro / "note.txt").write_text("mine")
    write_tree(out, OLD)
    # a person's read-only directory is carried into the new tree, and the old
    # copy (now at the temporary name) must still be removable
    ro.chmod(0o555)
    try:
        r = write_tree(out, NEW)
        assert r.ok and r.diagnostics == ()
        assert sorted(os.listdir(out.parent)) == ["generated"]
        assert (out / "mine" / "note.txt").read_text() == "mine"
    finally:
        (out / "mine").chmod(0o755)


@pytest.mark.slow
def test_build_cli_exits_0_with_a_leftover_warning(tmp_path):
    """Through the real entry point: the warning names the remains and the
    command, the exit is 0, and the next build is clean."""
    repo = Path(__file__).resolve().parents[2]
    spec = repo / "examples" / "fleet.yaml"
    gen = tmp_path / "generated"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    first = subprocess.run([sys.executable, "-m", "gpuplan", "build", str(spec), "-o", str(gen)],
                           capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    (gen / "obsolete.yaml").write_text("generated earlier")  # make the record list a file no longer produced
    record = (gen / RECORD_NAME).read_text()
    import hashlib

    (gen / RECORD_NAME).write_text(record + f"{hashlib.sha256(b'generated earlier').hexdigest()}  obsolete.yaml\n")
    victim = gen / "obsolete.yaml"
    code = textwrap.dedent(f"""
        import os, sys
        real = os.unlink
        st = os.lstat({str(victim)!r})
        def unlink(p, *a, dir_fd=None, **k):
            try:
                s2 = os.stat(p, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                s2 = None
            if s2 is not None and (s2.st_dev, s2.st_ino) == (st.st_dev, st.st_ino):
                raise PermissionError(1, "Operation not permitted", os.fsdecode(p))
            return real(p, *a, dir_fd=dir_fd, **k)
        os.unlink = unlink
        from gpuplan.cli.main import main
        sys.argv = ["gpuplan", "build", {str(spec)!r}, "-o", {str(gen)!r}]
        main()
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "warning[GP806]: the new tree is in place, but the old one could not be removed completely" in r.stderr
    assert "sudo rm -rf .generated.gpuplan-stale-" in r.stderr
    assert not (gen / "obsolete.yaml").exists()
    again = subprocess.run([sys.executable, "-m", "gpuplan", "build", str(spec), "-o", str(gen)],
                           capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and "GP806" not in again.stderr
    assert sorted(os.listdir(tmp_path)) == ["generated"]  # cleared once removable


def test_reads_of_the_tree_are_bounded(out, monkeypatch):
    """A generated file grown past any size gpuplan writes (planted in a pull
    request, say) is refused, not read into memory."""
    write_tree(out, OLD)
    monkeypatch.setattr(tree_mod, "MAX_FILE_BYTES", 1024)
    with open(out / "kustomization.yaml", "ab") as fh:
        fh.truncate(1 << 30)  # 1 GiB, sparse
    r = write_tree(out, NEW)
    assert [d.code for d in r.diagnostics] == ["GP808"]  # refused like a hand edit: nothing changed
    assert "kustomization.yaml was generated by gpuplan and is now a file larger than 1,024 bytes" \
        in r.diagnostics[0].message
    c = check_tree(out, NEW)  # stale, with the reason; the file is never read
    assert not c.ok and "kustomization.yaml" in c.differing
    assert "GP808" in [d.code for d in c.diagnostics]


# ------------------------------------------------------------------- TreeWriter


def test_tree_writer_streams_files_to_disk_before_the_swap(out: Path) -> None:
    """`gpuplan build` hands each file over as it is rendered: it is on disk in
    the new tree at once (memory keeps its hash), the old tree is untouched
    until commit, and reading it back gives the bytes."""
    from gpuplan.output.tree import TreeWriter

    write_tree(out, OLD)
    before = snapshot(out)
    staged = out.parent / ".generated.gpuplan-new"
    with TreeWriter(out) as tree:
        tree["tenants/vision/quota.yaml"] = NEW["tenants/vision/quota.yaml"]
        assert (staged / "tenants/vision/quota.yaml").read_bytes() == NEW["tenants/vision/quota.yaml"]
        assert tree["tenants/vision/quota.yaml"] == NEW["tenants/vision/quota.yaml"]
        assert tree._held == {}  # nothing kept in memory
        assert snapshot(out) == before
        for p in ("kustomization.yaml", "cluster/namespaces.yaml"):
            tree[p] = NEW[p]
        assert sorted(tree) == sorted(NEW) and len(tree) == 3 and "cluster/namespaces.yaml" in tree
        r = tree.commit()
    assert r.ok and r.removed == ("pools/train/ec2nodeclass.yaml", "pools/train/nodepool.yaml")
    assert snapshot(out) == generated(NEW)
    assert sorted(os.listdir(out.parent)) == ["generated"]


def test_tree_writer_left_without_commit_changes_nothing(out: Path) -> None:
    """An invalid spec or a tree the API server would reject leaves the block
    without a commit: the new tree goes, the old stays, the lock is released."""
    from gpuplan.output.tree import TreeWriter

    write_tree(out, OLD)
    before = snapshot(out)
    with TreeWriter(out) as tree:
        tree["kustomization.yaml"] = b"half\n"
        assert (out.parent / ".generated.gpuplan-new").is_dir()
    assert snapshot(out) == before
    assert sorted(os.listdir(out.parent)) == ["generated"]
    assert write_tree(out, NEW).ok  # not locked


def test_tree_writer_refused_tree_keeps_the_bytes_for_messages(out: Path) -> None:
    import fcntl

    from gpuplan.output.tree import TreeWriter

    out.parent.mkdir(parents=True)
    fd = os.open(out.parent / ".generated.gpuplan-lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with TreeWriter(out) as tree:
            tree["kustomization.yaml"] = NEW["kustomization.yaml"]
            assert tree["kustomization.yaml"] == NEW["kustomization.yaml"]
            r = tree.commit()
        assert [d.code for d in r.diagnostics] == ["GP804"] and "another gpuplan" in r.diagnostics[0].message
        assert not out.exists()
    finally:
        os.close(fd)


@pytest.mark.parametrize("first, second", [
    ("a/b.yaml", "a"), ("a", "a/b.yaml"), ("a.yaml", "a.yaml"),
])
def test_tree_writer_refuses_a_path_twice_or_as_file_and_directory(out: Path, first: str, second: str) -> None:
    from gpuplan.output.tree import TreeWriter

    with TreeWriter(out) as tree:
        tree[first] = b"x\n"
        with pytest.raises(ValueError):
            tree[second] = b"y\n"
    assert not out.exists()


def test_tree_writer_closes_once_and_reads_the_committed_tree(out: Path) -> None:
    """After commit the files are read from the tree in place; a second close
    (the ``with`` block's) must not touch a new tree another writer has begun."""
    from gpuplan.output.tree import TreeWriter

    with TreeWriter(out) as tree:
        for p in sorted(NEW):
            tree[p] = NEW[p]
        assert tree.commit().ok
        assert tree["cluster/namespaces.yaml"] == NEW["cluster/namespaces.yaml"]
        theirs = out.parent / ".generated.gpuplan-new"
        theirs.mkdir()
        (theirs / "kustomization.yaml").write_bytes(b"another writer's\n")
        with pytest.raises(RuntimeError):
            tree["late.yaml"] = b"x\n"
    assert (theirs / "kustomization.yaml").read_bytes() == b"another writer's\n"
    assert snapshot(out) == generated(NEW)


# -------------------------------------------------------------------- TreeCheck


def test_tree_check_keeps_only_the_files_that_differ(out: Path) -> None:
    """`gpuplan check` compares each file as it is rendered: a file equal to the
    disk is not kept (read back from the disk if asked for), and the result is
    check_tree's."""
    from gpuplan.output.tree import TreeCheck

    write_tree(out, NEW)
    changed = dict(NEW, **{"tenants/vision/quota.yaml": b"---\nkind: ResourceQuota\nspec: {}\n"})
    check = TreeCheck(out)
    for p in sorted(changed):
        check[p] = changed[p]
    assert check._kept == {"tenants/vision/quota.yaml": changed["tenants/vision/quota.yaml"]}
    assert check["cluster/namespaces.yaml"] == NEW["cluster/namespaces.yaml"]  # from the disk
    r = check.result()
    assert r.differing == (RECORD_NAME, "tenants/vision/quota.yaml") and not r.ok
    assert r.diff == check_tree(out, changed).diff and "+spec: {}" in r.diff
    with pytest.raises(ValueError):
        check["tenants/vision/quota.yaml/x"] = b"x\n"
