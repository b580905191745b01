"""`gpuplan mig plan`: exit codes, text and JSON output."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplan.cli.mig_plan import parse_demand, plan


def _run(*args: str):
    return CliRunner().invoke(plan, list(args))


def _no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_text_output_has_plan_bound_and_baseline() -> None:
    r = _run("A100-SXM4-80GB", "--demand", "3g.40gb=10,2g.20gb=10", "--demand", "1g.10gb=20")
    _no_traceback(r)
    assert r.exit_code == 0
    assert "A100-SXM4-80GB: 10 GPUs" in r.output
    assert "5 GPUs × {3g.40gb, 2g.20gb×2}" in r.output
    assert "5 GPUs × {3g.40gb, 1g.10gb×4}" in r.output
    assert "lower bound: 10 GPUs" in r.output and "optimal" in r.output
    assert "naive plan (one profile per GPU, all-<profile>): 12 GPUs; saving 2 GPUs" in r.output


def test_json_shape() -> None:
    r = _run("A100-80GB", "--demand", "4g.40gb=1,3g.40gb=1,2g.20gb=3,1g.20gb=1,1g.10gb=3", "--json")
    _no_traceback(r)
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert {"gpus", "lower_bound", "layouts", "optimal", "gap", "naive_gpus", "saving"} <= set(d)
    assert (d["gpus"], d["lower_bound"], d["gap"], d["optimal"]) == (3, 3, 0, True)
    assert (d["naive_gpus"], d["saving"]) == (5, 2)
    assert sum(item["gpus"] for item in d["layouts"]) == 3
    for item in d["layouts"]:
        assert set(item) == {"layout", "gpus"}
        assert all(isinstance(k, str) and isinstance(v, int) and v > 0 for k, v in item["layout"].items())


def test_unknown_profile_exits_1_with_did_you_mean() -> None:
    r = _run("A100-SXM4-80GB", "--demand", "3g.20gb=2")
    _no_traceback(r)
    assert r.exit_code == 1
    assert "did you mean 3g.40gb" in r.output


def test_unknown_profile_json_error_object() -> None:
    r = _run("A100-SXM4-80GB", "--demand", "3g.20gb=2", "--json")
    assert r.exit_code == 1
    # the message goes to stderr first, then the JSON object to stdout
    d = json.loads(r.output[r.output.index("{") :])
    assert d["suggestions"][0] == "3g.40gb" and "3g.20gb" in d["error"]


@pytest.mark.parametrize("model", ["A100-SXM4-81GB", "T4"])
def test_unknown_or_non_mig_model_exits_1(model: str) -> None:
    r = _run(model, "--demand", "1g.10gb=1")
    _no_traceback(r)
    assert r.exit_code == 1
    assert "error:" in r.output


@pytest.mark.parametrize(
    "args",
    [
        ["A100-SXM4-80GB", "--demand", "3g.40gb"],
        ["A100-SXM4-80GB", "--demand", "3g.40gb=x"],
        ["A100-SXM4-80GB", "--demand", "3g.40gb=-1"],
        ["A100-SXM4-80GB", "--demand", "=3"],
        ["A100-SXM4-80GB", "--demand", ","],
        ["A100-SXM4-80GB"],
        ["A100-SXM4-80GB", "--demand", "3g.40gb=1", "--time-limit", "0"],
        ["A100-SXM4-80GB", "--demand", "3g.40gb=1", "--objective", "cost"],
    ],
)
def test_bad_syntax_exits_2(args: list[str]) -> None:
    r = _run(*args)
    _no_traceback(r)
    assert r.exit_code == 2


def test_parse_demand_adds_repeats() -> None:
    assert parse_demand(("3g.40gb=2, 1g.10gb=4", "3g.40gb=1")) == {"3g.40gb": 3, "1g.10gb": 4}


def test_module_import_stays_lean() -> None:
    import subprocess
    import sys

    code = "import sys, gpuplan.cli.mig_plan; print('highspy' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
