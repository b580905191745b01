"""A pull request cannot run its own code in the report step, and no child
process of the report gets a credential: the pull request's checkout plants a
`gpuplan` package (and its environment holds GITHUB_TOKEN) and the report must
still be gpuplan's own, with the planted code never run."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuplan import pr_report
from gpuplan.pr_report import MARKER, child_env
from tests.cli.test_pr_report import _git, pr_repo  # noqa: F401  (pr_repo: the fixture)
from tests.conftest import REPO

SECRET = "ghs_PLANTEDTOKEN0123456789abcdef"


def _plant(repo: Path, pwned: Path) -> None:
    """The pull request adds a `gpuplan` package at its top: it records that it
    ran (and the token it saw) and forges a report."""
    pwned.mkdir()
    pkg = repo / "gpuplan"
    pkg.mkdir()
    record = (f"import os, pathlib\n"
              f"pathlib.Path({str(pwned)!r}, 'ran-%d' % os.getpid())"
              f".write_text(os.environ.get('GITHUB_TOKEN', '<no token>'))\n")
    (pkg / "__init__.py").write_text(record)
    forged = f"print({MARKER + chr(10) + 'FORGED: nothing changes'!r})\nraise SystemExit(0)\n"
    (pkg / "__main__.py").write_text(forged)
    (pkg / "pr_report.py").write_text(forged)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "innocent change")


def _assert_genuine(text: str) -> None:
    assert "FORGED" not in text
    assert text.startswith(MARKER + "\n")
    assert "change MIG state — drained" in text and "| Namespace |  | `research-notebooks` |" in text


@pytest.mark.slow
def test_planted_gpuplan_package_never_runs(pr_repo, tmp_path, monkeypatch):  # noqa: F811
    pwned = tmp_path / "pwned"
    _plant(pr_repo, pwned)
    monkeypatch.chdir(pr_repo)
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    out = tmp_path / "report.md"
    assert pr_report.main(["--base-ref", "main", "--report", str(out)]) == 0
    assert list(pwned.iterdir()) == []
    _assert_genuine(out.read_text())


@pytest.mark.slow
def test_local_command_is_safe_on_a_pr_branch(pr_repo, tmp_path):  # noqa: F811
    """The command the README gives reviewers, run in the pull request's checkout
    with no PYTHONPATH: the installed gpuplan runs, outer process and children."""
    pwned = tmp_path / "pwned"
    _plant(pr_repo, pwned)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GITHUB_TOKEN"] = SECRET
    out = tmp_path / "report.md"
    r = subprocess.run((sys.executable, "-I", "-m", "gpuplan.pr_report", "--base-ref", "main", "--report",
                        str(out)), cwd=pr_repo, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert list(pwned.iterdir()) == []
    _assert_genuine(out.read_text())


def _logging_wrapper(path: Path, real: str, log: Path) -> Path:
    """An executable that records its arguments and environment, then runs `real`."""
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" > "{log}/argv.$$"\nenv > "{log}/env.$$"\n'
                    f'exec "{real}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.slow
def test_children_get_no_credentials(pr_repo, tmp_path, monkeypatch):  # noqa: F811
    """Every process the report starts (gpuplan, git) is run through a wrapper that
    writes down its environment: no token in any, and gpuplan always under -I."""
    log = tmp_path / "log"
    log.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _logging_wrapper(bin_dir / "git", shutil.which("git"), log)
    python = _logging_wrapper(tmp_path / "python", sys.executable, log)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.chdir(pr_repo)
    for name, value in {"GITHUB_TOKEN": SECRET, "GH_TOKEN": SECRET, "ACTIONS_RUNTIME_TOKEN": SECRET,
                        "AWS_SECRET_ACCESS_KEY": SECRET, "REGISTRY_PASSWORD": SECRET}.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "report.md"
    assert pr_report.main(["--base-ref", "main", "--report", str(out)]) == 0
    assert "change MIG state — drained" in out.read_text()
    envs = sorted(log.glob("env.*"))
    argvs = [p.read_text() for p in log.glob("argv.*")]
    gpuplan_runs = [a for a in argvs if " -m gpuplan " in f" {a}"]
    assert len(gpuplan_runs) == 2 and len(envs) > 2  # plan, diff, and the git commands
    assert all(a.startswith("-I -m gpuplan ") for a in gpuplan_runs)
    for env in envs:
        text = env.read_text()
        assert "PATH=" in text  # a real environment, only without credentials
        assert SECRET not in text


def test_child_env_drops_credential_variables():
    env = {"GITHUB_TOKEN": "x", "GH_TOKEN": "x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "x",
           "ACTIONS_ID_TOKEN_REQUEST_URL": "x", "ACTIONS_RUNTIME_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_SESSION_TOKEN": "x", "DOCKER_PASSWORD": "x", "NPM_AUTH": "x", "HTTP_AUTHORIZATION": "x",
           "GOOGLE_APPLICATION_CREDENTIALS": "x", "SSH_AUTH_SOCK": "x", "github_token": "x",
           "HOME": "/h", "PATH": "/bin", "GIT_AUTHOR_NAME": "a", "GITHUB_BASE_REF": "main", "LANG": "C"}
    assert child_env(env) == {"HOME": "/h", "PATH": "/bin", "GIT_AUTHOR_NAME": "a", "GITHUB_BASE_REF": "main",
                              "LANG": "C"}
    assert "SSH_AUTH_SOCK" in child_env(env, keep=("SSH_AUTH_SOCK",))


def test_action_runs_the_report_isolated():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    runs = [s.get("run", "") for s in action["runs"]["steps"]]
    report = [r for r in runs if "gpuplan.pr_report" in r]
    assert len(report) == 1
    assert re.search(r"(^|\s)python -I -m gpuplan\.pr_report(\s|$)", report[0])
    # no step imports gpuplan from the checkout: `python -m` without -I puts it first on sys.path
    assert not [r for r in runs if re.search(r"python3?(?! -I)\s+-m\s+gpuplan", r)]
