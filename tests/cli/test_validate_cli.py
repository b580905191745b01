"""`gpuplan validate` through the real entry point: exit code, stdout and stderr together."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, run_gpuplan

INVALID = REPO / "tests" / "spec" / "invalid"


def test_valid_example_exits_0_and_says_so():
    r = run_gpuplan("validate", "examples/fleet.yaml")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "examples/fleet.yaml: valid (4 pools, 6 tiers, 3 tenants)\n"
    assert r.stderr == ""


@pytest.mark.parametrize("name,where", [
    ("unknown-key", ":13:37: error[GP101]: unknown key 'replica'"),
    ("wrong-type", ":11:20: error[GP103]: expected an integer, got a string ('4')"),
    ("syntax-error", ":11:6: error[GP001]:"),
    ("duplicate-key", ":12:7: error[GP002]: duplicate key 'gpu' (first defined on line 10)"),
    ("alias-bomb", ":7:8: error[GP006]: aliases expand to more than"),
])
def test_user_errors_exit_1_with_position_and_no_traceback(name, where):
    path = f"tests/spec/invalid/{name}.yaml"
    r = run_gpuplan("validate", path)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith(path + where), r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.rstrip().endswith("error, 0 warnings") or r.stderr.rstrip().endswith("errors, 0 warnings")


def test_text_output_shows_source_line_caret_and_hint():
    r = run_gpuplan("validate", "tests/spec/invalid/unknown-key.yaml")
    lines = r.stderr.splitlines()
    i = next(k for k, line in enumerate(lines) if "GP101" in line)
    assert lines[i + 2] == "13 |       sharing: {mode: time-slicing, replica: 4}"
    assert lines[i + 3] == "   |                                     ^^^^^^^"
    assert lines[i + 4] == "  = hint: did you mean 'replicas'?"


def test_json_format_goes_to_stdout():
    r = run_gpuplan("validate", "--format", "json", "tests/spec/invalid/wrong-type.yaml")
    assert r.returncode == 1 and r.stderr == ""
    diags = json.loads(r.stdout)["diagnostics"]
    assert diags == [{
        "code": "GP103", "severity": "error", "message": "expected an integer, got a string ('4')",
        "file": "tests/spec/invalid/wrong-type.yaml", "line": 11, "col": 20,
        "path": "spec.pools[0].gpusPerNode", "hint": "write the number without quotes",
    }]


def test_github_format_is_workflow_commands():
    r = run_gpuplan("validate", "--format", "github", "tests/spec/invalid/unknown-key.yaml")
    assert r.returncode == 1
    assert "::error file=tests/spec/invalid/unknown-key.yaml,line=13,col=37,title=gpuplan GP101::unknown key 'replica'%0Adid you mean 'replicas'?" in r.stdout


def test_sarif_format_is_valid_sarif_shape():
    r = run_gpuplan("validate", "--format", "sarif", "tests/spec/invalid/unknown-key.yaml")
    doc = json.loads(r.stdout)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {"GP101"}
    res = next(x for x in run["results"] if x["ruleId"] == "GP101")
    assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": 13, "startColumn": 37}


def test_missing_file_is_a_user_error():
    r = run_gpuplan("validate", "no/such/fleet.yaml")
    assert r.returncode == 1
    assert r.stderr.startswith("no/such/fleet.yaml: error[GP010]: cannot read")
    assert "Traceback" not in r.stderr


def test_usage_errors_exit_2():
    r = run_gpuplan("validate")
    assert r.returncode == 2
    assert "Missing argument 'FLEET'" in r.stderr
    r = run_gpuplan("validate", "--format", "xml", "examples/fleet.yaml")
    assert r.returncode == 2
    r = run_gpuplan("no-such-command")
    assert r.returncode == 2


def test_binary_file_is_a_user_error(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_bytes(bytes(range(256)) * 4)
    r = run_gpuplan("validate", str(p))
    assert r.returncode == 1
    assert "error[GP008]" in r.stderr and "Traceback" not in r.stderr


def test_hostile_names_are_reported_not_crashed_on(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(
        "apiVersion: gpuplan.dev/v1alpha1\nkind: Fleet\nmetadata: {name: \"on\\n: #{{ x }}\"}\n"
        "spec:\n  cluster: {kubernetesVersion: '1.33', gitops: {repoURL: 'x'}}\n"
        "  pools: [{name: \"../../etc\", gpu: T4, gpusPerNode: 1, nodes: [\"a;rm -rf\"]}]\n")
    r = run_gpuplan("validate", str(p))
    assert r.returncode == 1
    assert r.stderr.count("error[GP105]") == 3
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_strict_turns_warnings_into_failure(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text((REPO / "examples" / "fleet.yaml").read_text()
                 + "  rules:\n    disable:\n      - {code: GP999, reason: testing}\n")
    r = run_gpuplan("validate", str(p))
    assert r.returncode == 0 and "warning[GP114]" in r.stderr
    r = run_gpuplan("validate", "--strict", str(p))
    assert r.returncode == 1
