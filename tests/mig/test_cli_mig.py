"""`gpuplan mig profiles|layouts|check`: exit codes, stdout, stderr, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpuplan.cli.main import cli
from gpuplan.cli.mig import parse_layout_arg
from gpuplan.mig.solver import enumerate_layouts


def run(*args):
    return CliRunner().invoke(cli, ["mig", *args], catch_exceptions=False)


def run_split(*args):
    runner = CliRunner(**({"mix_stderr": False} if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else {}))
    return runner.invoke(cli, ["mig", *args], catch_exceptions=False)


def test_check_creatable_prints_placements_and_diagram():
    r = run_split("check", "A100-SXM4-40GB", "3g.20gb,2g.10gb,1g.5gb=2")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == "ok: 3g.20gb + 2g.10gb + 2×1g.5gb can be created on A100-SXM4-40GB"
    assert "memory  [   A 2g.10gb    ][   B   ][   C   ][            D 3g.20gb             ]" in r.stdout
    assert "D  3g.20gb          memory slices 4-7" in r.stdout
    assert r.stderr == ""


def test_check_not_creatable_prints_why_and_suggestions():
    r = run_split("check", "A100-40GB", "4g.20gb,2g.10gb=2")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("error GP204: 4g.20gb + 2×2g.10gb needs 8 compute slices")
    assert lines[1] == "  nearest creatable layouts:"
    assert lines[2].split() == ["4g.20gb=1,2g.10gb=1", "(-2g.10gb=1)"]
    assert r.stderr == ""


def test_repeated_profiles_add_up():
    assert parse_layout_arg("3g.40gb,2g.20gb=2,2g.20gb") == {"3g.40gb": 1, "2g.20gb": 3}
    r = run("check", "A100-80GB", "2g.20gb=2,2g.20gb=2")
    assert r.exit_code == 1 and "4×2g.20gb exceeds the limit of 3" in r.output


@pytest.mark.parametrize("text", ["", "3g.40gb,,1g.10gb", "3g.40gb=x", "3g.40gb=-1", "three", "3g.40gb=1.5"])
def test_parse_layout_rejects(text):
    with pytest.raises(ValueError):
        parse_layout_arg(text)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["check", "A10O-40GB", "1g.5gb"], "unknown GPU model 'A10O-40GB'"),
        (["check", "A100-40GB", "1g.5gb=x"], "count of 1g.5gb must be a whole number"),
        (["check", "A100-40GB", "3g.20gb,,1g.5gb"], "empty item"),
        (["check", "A100-40GB", "three-g"], "not a MIG profile name"),
        (["check", "A100-40GB"], "expected MODEL and LAYOUT"),
        (["check", "A100-40GB", "1g.5gb", "--driver", "new"], "cannot read driver version"),
        (["profiles", "H1000"], "unknown GPU model"),
        (["layouts", "nope"], "unknown GPU model"),
    ],
)
def test_usage_errors_exit_2_with_hint_and_no_traceback(args, needle):
    r = run_split(*args)
    assert r.exit_code == 2
    assert needle in r.stderr and r.stdout == ""
    assert "Traceback" not in r.stderr


def test_unknown_model_hint_is_a_did_you_mean():
    r = run_split("check", "A10O-40GB", "1g.5gb")
    assert "  hint: did you mean A100-SXM4-40GB" in r.stderr


def test_unknown_profile_is_invalid_not_usage():
    r = run("check", "A100-SXM4-40GB", "1g.6gb=2")
    assert r.exit_code == 1
    assert "error GP201" in r.output and "did you mean 1g.5gb" in r.output


def test_check_driver_option():
    assert run("check", "A100-40GB", "4g.20gb,3g.20gb").exit_code == 0
    r = run("check", "A100-40GB", "4g.20gb,3g.20gb", "--driver", "R470")
    assert r.exit_code == 1 and "error GP205" in r.output and "R510" in r.output


def test_check_not_mig_capable():
    r = run("check", "T4", "1g.5gb")
    assert r.exit_code == 1 and "error GP206: T4 does not support MIG" in r.output


def test_check_json():
    r = run("check", "A100-SXM4-40GB", "3g.20gb=2,1g.5gb", "--json")
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["ok"] is False and data["failure"]["kind"] == "no-placement" and data["failure"]["code"] == "GP204"
    assert data["suggestions"][0] == {"layout": {"3g.20gb": 2}, "removed": {"1g.5gb": 1}, "added": {}}
    r = run("check", "A100-SXM4-40GB", "4g.20gb,3g.20gb", "--json")
    data = json.loads(r.output)
    assert r.exit_code == 0 and data["placements"] == [
        {"profile": "4g.20gb", "start": 0, "size": 4, "compute_slices": 4},
        {"profile": "3g.20gb", "start": 4, "size": 4, "compute_slices": 3}]
    assert len(data["diagram"]["boxes"]) == 4


def test_profiles():
    r = run("profiles", "0x20B0")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0] == "A100-SXM4-40GB: 7 compute slices, 8 memory slices, at most 7 GPU instances"
    assert lines[3].split() == ["1g.5gb+me", "20", "1", "1", "1", "{0,1,2,3,4,5,6}:1", "R470"]
    data = json.loads(run("profiles", "H100", "--json").output)
    assert [p["name"] for p in data["profiles"]][:3] == ["1g.10gb", "1g.10gb+me", "1g.20gb"]
    assert data["profiles"][1]["resource_mixed"] == "nvidia.com/mig-1g.10gb.me"
    r = run("profiles", "T4")
    assert r.exit_code == 0 and "does not support MIG" in r.output


def test_layouts():
    r = run("layouts", "A100-SXM4-40GB", "--json")
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data == [dict(d) for d in enumerate_layouts("A100-SXM4-40GB")]
    assert {"4g.20gb": 1, "3g.20gb": 1} in data and {"3g.20gb": 2, "1g.5gb": 1} not in data
    r = run("layouts", "A30", "--maximal")
    assert r.exit_code == 0
    assert r.output.splitlines()[0] == "4g.24gb=1"
    assert "1g.6gb=4" in r.output.splitlines() and "1g.6gb=3" not in r.output.splitlines()
    r = run("layouts", "all", "--json", "--maximal")
    data = json.loads(r.output)
    assert r.exit_code == 0 and "B300" in data and "T4" not in data
    r = run("layouts", "L4")
    assert r.exit_code == 1 and "does not support MIG" in r.output


def test_plan_is_listed_and_check_does_not_import_a_solver():
    assert "plan" in run("--help").output
    code = ("import sys; from gpuplan.cli.main import main\n"
            "try:\n    main(['mig', 'check', 'A100-SXM4-40GB', '3g.20gb'])\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "bad = [m for m in ('highspy', 'scipy', 'numpy', 'gpuplan.cli.mig_plan', 'gpuplan.mig.planner') if m in sys.modules]\n"
            "print('BAD', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("BAD []")


@pytest.mark.slow
def test_layouts_for_every_model_from_the_command_line_is_fast():
    # CPU time of the whole process (interpreter start-up included): wall-clock
    # time on a shared 2-core CI box measures the neighbours as much as us.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    best = min(_cpu([sys.executable, "-m", "gpuplan", "mig", "layouts", "all"], env) for _ in range(3))
    assert best < 0.5, f"gpuplan mig layouts all took {best:.3f}s of CPU"


def _cpu(cmd, env):
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, capture_output=True, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
