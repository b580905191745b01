"""The GitHub Action and pre-commit hooks call commands and flags that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
import yaml

from gpuplan.cli.main import COMMANDS
from tests.conftest import REPO, run_gpuplan


def _flags_of(cmd: str) -> set[str]:
    r = run_gpuplan(cmd, "--help")
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"(--?[a-z][a-z-]*)", r.stdout))


def test_action_steps_use_real_commands_and_flags():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    calls = []
    for step in action["runs"]["steps"]:
        for line in step.get("run", "").splitlines():
            if "gpuplan " in line and "pip install" not in line:
                calls.append(line[line.index("gpuplan "):])
    assert {c.split()[1] for c in calls} == {"validate", "check"}
    for call in calls:
        words = shlex.split(call.split(">>")[0].split("||")[0])
        cmd = words[1]
        assert cmd in COMMANDS
        flags = _flags_of(cmd)
        for w in words[2:]:
            if w.startswith("-"):
                assert w in flags, (cmd, w)


def test_action_pr_report_step_uses_real_flags():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    runs = [line.strip() for step in action["runs"]["steps"] for line in step.get("run", "").splitlines()
            if "gpuplan.pr_report" in line]
    assert runs == ['python -I -m gpuplan.pr_report --annotations --fleet "$FLEET" --output "$OUT" "${flags[@]}"']
    r = subprocess.run([sys.executable, "-m", "gpuplan.pr_report", "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for flag in ("--fleet", "--output", "--comment", "--annotations"):
        assert flag in r.stdout
    step = next(s for s in action["runs"]["steps"] if "gpuplan.pr_report" in s.get("run", ""))
    assert step["if"] == "always() && github.event_name == 'pull_request'"
    assert step["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"


def test_pre_commit_hooks_use_real_commands():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"gpuplan-validate", "gpuplan-check"}
    for h in hooks:
        prog, cmd = h["entry"].split()
        assert prog == "gpuplan" and cmd in COMMANDS
        assert re.compile(h["files"]).search("fleet.yaml")


@pytest.mark.slow
def test_pre_commit_validate_hook_takes_every_staged_spec(tmp_path):
    """pre-commit runs `entry + args + staged files` in one call: with two
    fleet.yaml files staged, both are validated (exit 1 only for a real error)."""
    from tests.conftest import run_gpuplan

    (hook,) = [h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "gpuplan-validate"]
    assert hook["pass_filenames"] is True
    minimal = (REPO / "tests" / "spec" / "valid" / "minimal.yaml").read_text()
    staged = []
    for d in ("eu", "us"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "fleet.yaml").write_text(minimal)
        staged.append(f"{d}/fleet.yaml")
    assert all(re.compile(hook["files"]).search(f) for f in staged)
    argv = hook["entry"].split()[1:] + list(hook.get("args", [])) + staged
    r = run_gpuplan(*argv, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{f}: valid (1 pools, 0 tiers, 0 tenants)" for f in staged]
    (tmp_path / "us" / "fleet.yaml").write_text(minimal.replace("gpusPerNode: 4", "gpusPerNode: 0"))
    r = run_gpuplan(*argv, cwd=tmp_path)
    assert r.returncode == 1 and "us/fleet.yaml:11:20: error[GP109]" in r.stderr
