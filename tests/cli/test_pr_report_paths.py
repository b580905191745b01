"""The report reads nothing outside the repository: a fleet or output path that
is a symlink (any component of it) or leads out of the repository is refused,
in the pull request and on the base branch, and the report says why instead of
quoting the file (`fleet.yaml -> ~/.git-credentials` quoted it under GP004)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuplan import pr_report
from gpuplan.pr_report import MARKER, Refused, check_inside, repo_relative
from tests.cli.test_pr_report import _git, pr_repo  # noqa: F401  (pr_repo: the fixture)

TOKEN = "ghp_FAKEfakeFAKEfake0123456789abcdefghij"


@pytest.fixture
def secret(tmp_path) -> Path:
    """A credentials file outside the repository, in the shape of ~/.git-credentials
    (one line, as `machine ... password` is in ~/.netrc)."""
    d = tmp_path / "home"
    d.mkdir()
    f = d / ".git-credentials"
    f.write_text(f"machine github.com login x password {TOKEN}\n")
    (d / "fleet.yaml").write_text(f"apiVersion: {TOKEN}\nkind: Fleet\n")
    return f


def _commit(repo: Path, msg: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", msg)


def _assert_refused(text: str, *why: str) -> None:
    assert TOKEN not in text and "password" not in text
    assert text.startswith(MARKER + "\n")
    for w in why:
        assert w in text


@pytest.mark.slow
def test_symlinked_fleet_in_the_pull_request_is_refused(pr_repo, secret):  # noqa: F811
    (pr_repo / "fleet.yaml").unlink()
    (pr_repo / "fleet.yaml").symlink_to(secret)
    _commit(pr_repo, "fleet.yaml -> ~/.git-credentials")
    text = pr_report.report("fleet.yaml", "generated", "main", pr_repo)
    _assert_refused(text, "`fleet.yaml` in this pull request is a symbolic link: "
                          "the report reads nothing through a link")


@pytest.mark.slow
def test_symlinked_directory_on_the_fleet_path_is_refused(pr_repo, secret):  # noqa: F811
    (pr_repo / "cfg").symlink_to(secret.parent, target_is_directory=True)
    _commit(pr_repo, "cfg -> ~")
    text = pr_report.report("cfg/fleet.yaml", "generated", "main", pr_repo)
    _assert_refused(text, "`cfg/fleet.yaml` in this pull request is under a symbolic link (`cfg`)")


@pytest.mark.slow
def test_symlinked_output_tree_is_refused(pr_repo, secret):  # noqa: F811
    _git(pr_repo, "rm", "-rq", "generated")
    (pr_repo / "generated").symlink_to(secret.parent, target_is_directory=True)
    _commit(pr_repo, "generated -> ~")
    text = pr_report.report("fleet.yaml", "generated", "main", pr_repo)
    _assert_refused(text, "`generated` in this pull request is a symbolic link")


@pytest.mark.slow
def test_symlinked_fleet_on_the_base_branch_is_refused(pr_repo, secret):  # noqa: F811
    """The base path is the pull request's path replayed in the base worktree:
    there it is a link out. The plan is refused; the object diff still runs."""
    _git(pr_repo, "checkout", "-q", "main")
    (pr_repo / "fleet.yaml").unlink()
    (pr_repo / "fleet.yaml").symlink_to(secret)
    _commit(pr_repo, "fleet.yaml -> ~/.git-credentials")
    _git(pr_repo, "checkout", "-q", "change")
    text = pr_report.report("fleet.yaml", "generated", "main", pr_repo)
    _assert_refused(text, "`fleet.yaml` on `main` is a symbolic link")
    assert "| Namespace |  | `research-notebooks` |" in text  # generated/ on main is real: diffed


@pytest.mark.slow
def test_path_leaving_the_repository_is_refused(pr_repo, secret):  # noqa: F811
    rel = os.path.relpath(secret.parent / "fleet.yaml", pr_repo)
    assert rel.startswith("..")
    text = pr_report.report(rel, "generated", "main", pr_repo)
    _assert_refused(text, f"`{rel}` is outside the repository")


def test_repo_relative_is_lexical(tmp_path):
    top = tmp_path / "repo"
    assert repo_relative("a/../fleet.yaml", top, top) == "fleet.yaml"
    assert repo_relative("fleet.yaml", top / "sub", top) == os.path.join("sub", "fleet.yaml")
    for bad in ("../fleet.yaml", "a/../../fleet.yaml", str(tmp_path / "other" / "fleet.yaml")):
        with pytest.raises(Refused, match="outside the repository"):
            repo_relative(bad, top, top)


def test_check_inside_refuses_links_but_not_missing_paths(tmp_path):
    top = tmp_path / "repo"
    (top / "real").mkdir(parents=True)
    (top / "real" / "fleet.yaml").write_text("x")
    (top / "inside-link").symlink_to(top / "real")  # a link, even one that stays inside
    check_inside(top, "real/fleet.yaml", "real/fleet.yaml", "here")
    check_inside(top, "missing/fleet.yaml", "missing/fleet.yaml", "here")
    with pytest.raises(Refused, match="symbolic link"):
        check_inside(top, "inside-link/fleet.yaml", "inside-link/fleet.yaml", "here")
