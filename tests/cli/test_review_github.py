"""`gpuplan review --format github`: workflow commands for a CI log, then the text document.

A real git repository with a real base branch, the real plan/validate/diff runs. The runs
are this checkout's code (``gpuplan_argv`` without ``-I``, which would import the installed
package): the review's own parts are what is tested."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplan import pr_report
from gpuplan.cli.main import cli
from tests.cli.test_pr_report import GIT_ENV, _build, _changed_spec, _git
from tests.conftest import REPO
from tests.rules.helpers import position


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """`main`: the example fleet and its tree, checked out on a branch `change` (the test edits it)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(pr_report, "gpuplan_argv", lambda *args: (sys.executable, "-m", "gpuplan", *args))
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    repo = tmp_path / "fleet-repo"
    repo.mkdir()
    (repo / "fleet.yaml").write_text((REPO / "examples" / "fleet.yaml").read_text())
    _git(repo, "init", "-q", "-b", "main")
    _build(repo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "change")
    monkeypatch.chdir(repo)
    return repo


def _review(*args: str):
    return CliRunner().invoke(cli, ["review", "--base", "main", "--format", "github", *args])


def _commands(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("::")]


def test_an_added_error_is_an_error_annotation_at_its_line(repo):
    text = (repo / "fleet.yaml").read_text().replace("      priority: 1000\n",
                                                     "      priority: 1000\n      maxOversubscription: 0.1\n")
    (repo / "fleet.yaml").write_text(text)
    r = _review()
    assert r.exit_code == 1  # the new side is invalid
    line, col = position(text, "0.1\n")
    assert f"::error file=fleet.yaml,line={line},col={col},title=gpuplan GP410::quota " in r.output
    # the commands first, then the document (the runner reads commands from any line)
    lines = r.output.splitlines()
    first_doc = lines.index(next(ln for ln in lines if ln.startswith("gpuplan review: ")))
    assert all(ln.startswith("::") for ln in lines[:first_doc])
    assert not any(ln.startswith("::") for ln in lines[first_doc:])


def test_a_disruption_is_a_warning_at_the_line_that_causes_it(repo):
    text = _changed_spec((repo / "fleet.yaml").read_text())
    (repo / "fleet.yaml").write_text(text)
    _build(repo)
    r = _review()
    assert r.exit_code == 0, r.output
    cmds = _commands(r.output)
    # the MIG layout change drains the pool's nodes: at the pool's layout
    line, col = position(text, "layout: {3g.40gb: 1, 1g.10gb: 4}", len("layout: "))
    drains = [c for c in cmds if "title=gpuplan GP813::drain: node gpu-a100-05 (pool infer-a100)" in c]
    assert drains and drains[0].startswith(f"::warning file=fleet.yaml,line={line},col={col},")
    # the namespace of a removed tenant has no line left in the spec: at the file
    assert any(c.startswith("::warning file=fleet.yaml,title=gpuplan GP813::destructive: Namespace research-notebooks")
               for c in cmds)
    # the tier whose priority changed: at its priority
    line, col = position(text, "priority: 2000", len("priority: "))
    assert any(c.startswith(f"::warning file=fleet.yaml,line={line},col={col},title=gpuplan GP813::replace: "
                            "PriorityClass gpuplan-notebooks") for c in cmds)
    # and the text document after them, the same as `--format text`
    plain = CliRunner().invoke(cli, ["review", "--base", "main"])
    assert r.output.endswith(plain.output) and len(r.output) > len(plain.output)


def test_the_action_report_prints_the_change_annotations(repo, capsys):
    (repo / "fleet.yaml").write_text(_changed_spec((repo / "fleet.yaml").read_text()))
    _build(repo)
    assert pr_report.main(["--annotations", "--base-ref", "main", "--report", str(repo.parent / "r.md")]) == 0
    cmds = _commands(capsys.readouterr().out)
    assert cmds and all("title=gpuplan GP81" in c for c in cmds)  # the diagnostics are the validate step's
    # the pool's first node takes the layout now, the other is held for the next step (a hand step)
    assert any("GP813::drain: node gpu-a100-05" in c for c in cmds)
    assert not any("GP813::drain: node gpu-a100-06" in c for c in cmds)
    assert any("GP814::" in c and "pool infer-a100 rollout" in c and "--advance infer-a100" in c for c in cmds)
