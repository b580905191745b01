"""The pull request is hostile input: paths it can plant (a symlinked spec or
generated/, a symlinked directory on the way), tree files it can commit (an
alias bomb, a 5,000-digit integer, a 6 GiB sparse file), odd file names, and
a tree that changes while it is read. None of them may read or quote a file
outside the repository, hang, or end in exit 4 / a traceback.

Every run is bounded: a subprocess with a timeout (and an address-space limit
where memory is at stake), or an in-process call that cannot loop."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_gpuplan

SECRET = "ghp_0123456789abcdefSECRET"
CREDENTIALS = f"machine github.com login x password {SECRET}\n"
MEMORY = 3 << 30  # address space for one hostile run: a bomb expanded would need far more


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout: .git, fleet.yaml, no generated/ yet; secrets beside it."""
    r = tmp_path / "repo"
    (r / ".git").mkdir(parents=True)
    (r / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n")
    shutil.copy(REPO / "examples" / "fleet.yaml", r / "fleet.yaml")
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".git-credentials").write_text(CREDENTIALS)
    return r


def bounded(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """run_gpuplan with an address-space limit: a run that would expand a bomb
    fails on its own instead of taking the machine down."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    env = dict(os.environ, PYTHONUTF8="1")
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limit)


def no_leak(r: subprocess.CompletedProcess) -> None:
    out = r.stdout + r.stderr
    assert SECRET not in out and "password" not in out, out
    assert "Traceback" not in out and "internal error" not in out, out


# --- the spec path ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", ["outside", "inside"])
def test_symlinked_spec_is_refused_before_a_byte_is_read(repo: Path, target: str) -> None:
    """`fleet.yaml -> ~/.git-credentials` quoted the password under GP004; a
    link that stays inside (`-> .git/config`) would quote the token just the same."""
    spec = repo / "fleet.yaml"
    spec.unlink()
    spec.symlink_to(repo.parent / "home" / ".git-credentials" if target == "outside" else repo / ".git" / "config")
    for args in (["validate", "fleet.yaml"], ["validate", "--format", "github", "fleet.yaml"],
                 ["validate", "--format", "sarif", "fleet.yaml"], ["build", "fleet.yaml"], ["check", "fleet.yaml"],
                 ["diff", "fleet.yaml"], ["plan", "fleet.yaml"]):
        r = run_gpuplan(*args, cwd=repo, timeout=60)
        assert r.returncode == 1, (args, r.stderr)
        assert "GP015" in r.stdout + r.stderr, (args, r.stdout, r.stderr)
        no_leak(r)
    assert not (repo / "generated").exists()


def test_spec_behind_a_symlinked_directory_that_leads_out_is_refused(repo: Path) -> None:
    outside = repo.parent / "home" / "clusters"
    outside.mkdir()
    (outside / "fleet.yaml").write_text(CREDENTIALS)
    (repo / "clusters").symlink_to(outside)
    r = run_gpuplan("validate", "clusters/fleet.yaml", cwd=repo, timeout=60)
    assert r.returncode == 1 and "GP015" in r.stderr and "leads out of its repository" in r.stderr
    no_leak(r)


@pytest.mark.slow
def test_spec_named_outside_the_repository_is_read_as_named(repo: Path, tmp_path: Path) -> None:
    """Only symlinks are refused: a real path the caller names is theirs."""
    r = run_gpuplan("validate", str(REPO / "examples" / "fleet.yaml"), cwd=repo, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["validate", "build", "check", "diff", "plan", "verify-cluster"])
def test_a_directory_as_the_spec_is_gp013_not_a_usage_error(repo: Path, command: str) -> None:
    (repo / "adir").mkdir()
    extra = ("--live", "-") if command == "verify-cluster" else ()
    r = run_gpuplan(command, "adir", *extra, cwd=repo, timeout=60, input="{}")
    assert r.returncode == 1, r.stderr
    assert "error[GP013]" in r.stderr and "adir is a directory" in r.stderr
    no_leak(r)


@pytest.mark.parametrize("command", ["validate", "build", "check", "plan"])
def test_an_unreadable_spec_is_gp010_not_a_usage_error(repo: Path, command: str, monkeypatch, capsys) -> None:
    """chmod 000 does not stop root (the tests' user), so the permission check
    and the open both say EACCES here, in process: click's own `readable`
    check (exit 2) must not stand in front of the loader's GP010."""
    from gpuplan.cli.main import main

    spec = str(repo / "fleet.yaml")
    real_open, real_access = os.open, os.access

    def deny_open(path, *a, **k):
        if os.fspath(path) == spec:
            raise PermissionError(13, "Permission denied", spec)
        return real_open(path, *a, **k)

    monkeypatch.chdir(repo)
    monkeypatch.setattr(os, "access", lambda p, *a, **k: False if os.fspath(p) == spec else real_access(p, *a, **k))
    monkeypatch.setattr(os, "open", deny_open)
    with pytest.raises(SystemExit) as exc:
        main([command, spec])
    err = capsys.readouterr().err
    assert exc.value.code == 1, err
    assert "error[GP010]" in err and "Permission denied" in err


@pytest.mark.slow
def test_a_spec_name_that_is_not_utf8_builds(repo: Path) -> None:
    """b'fleet-\\xff.yaml' made `build` exit 4 (the generated headers name the spec)."""
    name = os.fsdecode(b"fleet-\xff.yaml")
    os.rename(repo / "fleet.yaml", repo / name)
    r = run_gpuplan("build", name, cwd=repo, timeout=120)
    assert r.returncode == 0, r.stderr
    head = (repo / "generated" / "kustomization.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert head == "# generated by gpuplan from fleet-\\xff.yaml; do not edit"
    r = run_gpuplan("check", name, cwd=repo, timeout=120)
    assert r.returncode == 0, r.stderr
    r = run_gpuplan("validate", "--format", "json", name, cwd=repo, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr


# --- the output tree path ----------------------------------------------------------------


def _foreign_tree(where: Path) -> None:
    """A directory that looks like a generated tree, holding a secret."""
    where.mkdir(parents=True)
    (where / "kustomization.yaml").write_text(CREDENTIALS)
    sha = hashlib.sha256(CREDENTIALS.encode()).hexdigest()
    (where / ".gpuplan.sha256").write_text(f"{sha}  kustomization.yaml\n")


@pytest.mark.parametrize("command", ["build", "check", "diff"])
def test_symlinked_generated_is_refused(repo: Path, command: str) -> None:
    outside = repo.parent / "home" / "tree"
    _foreign_tree(outside)
    before = sorted(p.name for p in outside.iterdir())
    (repo / "generated").symlink_to(outside)
    r = run_gpuplan(command, "fleet.yaml", cwd=repo, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "error[GP807]" in r.stderr and "generated is a symlink" in r.stderr
    no_leak(r)
    assert sorted(p.name for p in outside.iterdir()) == before  # nothing written there
    assert (outside / "kustomization.yaml").read_text() == CREDENTIALS


def test_diff_refuses_a_symlinked_generated_even_with_old(repo: Path, tmp_path: Path) -> None:
    """The pull-request report derives --old (the base worktree) from -o as
    resolved: `generated -> /` would make --old the root of the machine."""
    (repo / "generated").symlink_to("/")
    base = tmp_path / "base"
    base.mkdir()
    r = run_gpuplan("diff", "fleet.yaml", "-o", "generated", "--old", str(base), cwd=repo, timeout=60)
    assert r.returncode == 1 and "GP807" in r.stderr, r.stderr


@pytest.mark.parametrize("command", ["check", "diff"])
def test_generated_pointing_at_the_root_is_refused_at_once(repo: Path, command: str) -> None:
    """`generated -> /` walked the whole filesystem and ended in exit 4."""
    (repo / "generated").symlink_to("/")
    r = run_gpuplan(command, "fleet.yaml", cwd=repo, timeout=60)
    assert r.returncode == 1 and "GP807" in r.stderr, r.stderr
    no_leak(r)


def test_output_behind_a_symlinked_directory_that_leads_out_is_refused(repo: Path) -> None:
    outside = repo.parent / "home" / "out"
    _foreign_tree(outside / "generated")
    (repo / "sub").symlink_to(outside)
    for args in (["check", "fleet.yaml", "-o", "sub/generated"], ["build", "fleet.yaml", "-o", "sub/generated"],
                 ["diff", "fleet.yaml", "--old", "sub/generated"]):
        r = run_gpuplan(*args, cwd=repo, timeout=60)
        assert r.returncode == 1 and "GP807" in r.stderr and "leads out of the repository" in r.stderr, r.stderr
        no_leak(r)
    assert (outside / "generated" / "kustomization.yaml").read_text() == CREDENTIALS


@pytest.mark.slow
def test_a_tree_named_outside_the_repository_is_used_as_named(repo: Path, tmp_path: Path) -> None:
    """-o /elsewhere and --old <base worktree>/generated (the pull-request report) stay usable."""
    elsewhere = tmp_path / "elsewhere" / "generated"
    assert run_gpuplan("build", "fleet.yaml", "-o", str(elsewhere), cwd=repo, timeout=120).returncode == 0
    r = run_gpuplan("check", "fleet.yaml", "-o", str(elsewhere), cwd=repo, timeout=120)
    assert r.returncode == 0, r.stderr
    r = run_gpuplan("diff", "fleet.yaml", "-o", str(elsewhere), "--old", str(elsewhere), cwd=repo, timeout=120)
    assert r.returncode == 0 and "0 added, 0 removed, 0 changed" in r.stdout, r.stderr


def test_output_path_that_is_a_file_is_gp804(repo: Path) -> None:
    (repo / "generated").write_text("x")
    r = run_gpuplan("check", "fleet.yaml", cwd=repo, timeout=60)
    assert r.returncode == 1 and "GP804" in r.stderr, r.stderr


# --- what the tree holds ------------------------------------------------------------------

POOL_FILE = "pools/burst-h100/nodepool.yaml"  # a NodePool of examples/fleet.yaml


def _plant(repo: Path, rel: str, data: bytes | None = None, *, size: int | None = None) -> None:
    """Replace a generated file and its line of the record, as a pull request can."""
    gen = repo / "generated"
    p = gen / rel
    if size is not None:
        with open(p, "wb") as fh:
            fh.truncate(size)  # sparse: no disk cost
        sha = "0" * 64
    else:
        p.write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
    rec = gen / ".gpuplan.sha256"
    lines = [f"{sha}  {rel}" if line.endswith(f"  {rel}") else line for line in rec.read_text().splitlines()]
    rec.write_text("\n".join(lines) + "\n")


def _bomb_object() -> bytes:
    """1 KB: a NodePool (so the diff compares it field by field) whose spec is
    a list aliases expand to 10^9 values."""
    lines = ["apiVersion: karpenter.sh/v1", "kind: NodePool", "metadata: {name: burst-h100}",
             'x0: &x0 ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]']
    for i in range(1, 9):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]")
    lines.append("spec: *x8")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def built(repo: Path) -> Path:
    r = run_gpuplan("build", "fleet.yaml", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (repo / "generated" / POOL_FILE).is_file()
    return repo


@pytest.mark.slow
def test_alias_bomb_in_the_tree_does_not_hang_diff(built: Path) -> None:
    _plant(built, POOL_FILE, _bomb_object())
    r = bounded("diff", "fleet.yaml", cwd=built)
    assert r.returncode == 0, r.stderr
    assert POOL_FILE in r.stdout  # compared as text: the reader refused the bomb
    no_leak(r)
    r = bounded("check", "fleet.yaml", cwd=built)
    assert r.returncode == 3, r.stderr
    no_leak(r)


@pytest.mark.slow
def test_alias_bomb_in_an_embedded_payload_does_not_hang_diff(built: Path) -> None:
    """A ConfigMap's config.yaml is parsed and compared field by field."""
    rel = "gpu-operator/device-plugin-config.yaml"
    payload = "\n".join(['x0: &x0 ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]']
                        + [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]" for i in range(1, 9)]) + "\n"
    import json

    doc = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "gpuplan-device-plugin-config", "namespace": "gpu-operator"},
           "data": {"gpuplan.default": payload}}  # a key the new tree has: compared field by field
    _plant(built, rel, json.dumps(doc).encode())
    r = bounded("diff", "--format", "markdown", "fleet.yaml", cwd=built)
    assert r.returncode == 0, r.stderr
    no_leak(r)


@pytest.mark.slow
def test_five_thousand_digit_integer_in_the_tree(built: Path) -> None:
    data = (b"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: burst-h100}\nspec:\n  weight: "
            + b"9" * 5000 + b"\n")
    _plant(built, POOL_FILE, data)
    r = bounded("diff", "fleet.yaml", cwd=built)
    assert r.returncode == 0, r.stderr
    no_leak(r)
    r = bounded("check", "fleet.yaml", cwd=built)
    assert r.returncode == 3, r.stderr
    no_leak(r)


@pytest.mark.slow
def test_six_gib_sparse_file_in_the_tree_is_never_read(built: Path) -> None:
    _plant(built, POOL_FILE, size=6 << 30)
    r = bounded("diff", "fleet.yaml", cwd=built)
    assert r.returncode == 0, r.stderr
    assert "warning[GP808]" in r.stderr and POOL_FILE in r.stderr
    no_leak(r)
    r = bounded("check", "fleet.yaml", cwd=built)
    assert r.returncode == 3, r.stderr
    assert "warning[GP808]" in r.stderr and f"@@ {POOL_FILE} is a file larger than" in r.stdout
    no_leak(r)


# --- a tree that changes while it is read ---------------------------------------------------


def _run_in_process(args: list[str], capsys) -> tuple[int, str, str]:
    from gpuplan.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.slow
@pytest.mark.parametrize("how", ["delete", "swap"])
@pytest.mark.parametrize("command", ["check", "diff"])
def test_tree_changed_between_listing_and_reading(built: Path, how: str, command: str, monkeypatch, capsys) -> None:
    """A concurrent `gpuplan build` swaps the tree while `check`/`diff` read it
    (exit 4 before). Simulated deterministically: right after the tree is
    listed, a file goes away (delete), or the whole tree is exchanged for a
    copy without it (swap, as the builder's rename does)."""
    from gpuplan.output import tree as tree_mod

    gen = built / "generated"
    real_scan = tree_mod._scan
    done = []

    def scan_then_change(*a, **k):
        entries = real_scan(*a, **k)
        if not done:
            done.append(True)
            if how == "delete":
                (gen / POOL_FILE).unlink()
            else:
                moved = built / ".generated.gpuplan-new"
                shutil.copytree(gen, moved, symlinks=True)
                (moved / POOL_FILE).unlink()
                os.rename(gen, built / "old-tree")
                os.rename(moved, gen)
                shutil.rmtree(built / "old-tree")  # the old tree is removed after the swap
        return entries

    monkeypatch.chdir(built)
    monkeypatch.setattr(tree_mod, "_scan", scan_then_change)
    code, out, err = _run_in_process([command, "fleet.yaml"], capsys)
    assert done
    assert "Traceback" not in err and "internal error" not in err, err
    if command == "check":
        assert code == 3, err  # stale: the file is missing
    else:
        assert code == 0, err
    assert "GP809" in err and "disappeared while the tree was read" in err


# --- inventory pull, codes ------------------------------------------------------------------


@pytest.mark.parametrize("code", ["GP015", "GP807", "GP808", "GP809"])
def test_new_codes_are_explained(code: str) -> None:
    r = run_gpuplan("explain", code, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(code), r.stderr
