"""`gpuplan build`, `check`, `diff` through the real entry point."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, run_gpuplan


def tree_hash(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    (ws / "examples").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "fleet.yaml", ws / "examples" / "fleet.yaml")
    return ws


@pytest.mark.slow
def test_committed_generated_tree_is_current():
    r = run_gpuplan("check", "examples/fleet.yaml")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert r.stdout.startswith("generated: up to date (")


@pytest.mark.slow
def test_build_check_edit_force_cycle(workspace: Path):
    r = run_gpuplan("build", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("generated: ") and "written" in r.stdout
    assert run_gpuplan("check", "examples/fleet.yaml", cwd=workspace).returncode == 0

    target = workspace / "generated" / "cluster" / "priorityclasses.yaml"
    target.write_text(target.read_text() + "# my change\n")
    r = run_gpuplan("check", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 3
    assert "-# my change" in r.stdout and "--- a/cluster/priorityclasses.yaml" in r.stdout
    assert "stale" in r.stderr

    r = run_gpuplan("build", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 1
    assert "error[GP801]" in r.stderr and "cluster/priorityclasses.yaml" in r.stderr
    assert target.read_text().endswith("# my change\n")  # untouched

    r = run_gpuplan("build", "--force", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 0
    assert "# my change" not in target.read_text()


@pytest.mark.slow
def test_stale_files_pruned_and_personal_files_kept(workspace: Path):
    spec = workspace / "examples" / "fleet.yaml"
    assert run_gpuplan("build", "examples/fleet.yaml", cwd=workspace).returncode == 0
    mine = workspace / "generated" / "NOTES.txt"
    mine.write_text("mine\n")
    text = spec.read_text()
    # drop the research tenant: its files must go, NOTES.txt must stay
    spec.write_text(text[: text.index("    - name: research")])
    r = run_gpuplan("build", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert not (workspace / "generated" / "tenants" / "research").exists()
    assert mine.read_text() == "mine\n"


@pytest.mark.slow
def test_invalid_spec_writes_nothing(workspace: Path):
    assert run_gpuplan("build", "examples/fleet.yaml", cwd=workspace).returncode == 0
    before = tree_hash(workspace / "generated")
    spec = workspace / "examples" / "fleet.yaml"
    spec.write_text(spec.read_text().replace("replicas: 4", "replicas: 1"))
    r = run_gpuplan("build", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 1 and "error[GP301]" in r.stderr
    assert tree_hash(workspace / "generated") == before


@pytest.mark.slow
def test_diff_reports_changed_objects(workspace: Path):
    assert run_gpuplan("build", "examples/fleet.yaml", cwd=workspace).returncode == 0
    spec = workspace / "examples" / "fleet.yaml"
    spec.write_text(spec.read_text().replace("research-notebooks: {notebooks: 16}", "research-notebooks: {notebooks: 12}"))
    r = run_gpuplan("diff", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert "ResourceQuota" in r.stdout and "research-notebooks" in r.stdout
    assert "16" in r.stdout and "12" in r.stdout
    r = run_gpuplan("diff", "--format", "markdown", "examples/fleet.yaml", cwd=workspace)
    assert r.returncode == 0 and "|" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["0", "1", "4242"])
def test_output_is_identical_across_hash_seeds_and_working_dirs(workspace: Path, tmp_path: Path, seed: str):
    # built at the repository root with relative paths under one hash seed ...
    r = run_gpuplan("build", "examples/fleet.yaml", cwd=workspace, env={"PYTHONHASHSEED": seed})
    assert r.returncode == 0, r.stderr
    # ... equals the committed tree, built elsewhere, under another seed
    assert tree_hash(workspace / "generated") == tree_hash(REPO / "generated")
    # and from another working directory, with absolute paths
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.rmtree(workspace / "generated")
    r = run_gpuplan("build", str(workspace / "examples" / "fleet.yaml"), "-o", str(workspace / "generated"),
                    cwd=other, env={"PYTHONHASHSEED": str(int(seed) + 7)})
    assert r.returncode == 0, r.stderr
    assert tree_hash(workspace / "generated") == tree_hash(REPO / "generated")
