"""The GitHub Action and pre-commit hooks call commands and flags that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

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
    assert runs == ['python -m gpuplan.pr_report --fleet "$FLEET" --output "$OUT" "${flags[@]}"']
    r = subprocess.run([sys.executable, "-m", "gpuplan.pr_report", "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for flag in ("--fleet", "--output", "--comment"):
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
