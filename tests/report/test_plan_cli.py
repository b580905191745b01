"""`gpuplan plan`: formats, -o, --base, --optimise, invalid specs, CAPACITY.md."""

import json

import pytest
from click.testing import CliRunner

from gpuplan.cli.main import cli
from tests.report.helpers import SCENARIO, write
from tests.rules.helpers import BASE, edit


def plan(*args):
    return CliRunner().invoke(cli, ["plan", *map(str, args)], catch_exceptions=False)


def test_text_report(tmp_path):
    r = plan(write(tmp_path, SCENARIO))
    assert r.exit_code == 0, r.output
    assert "32 physical GPUs in 3 pools" in r.stdout


def test_json_to_file(tmp_path):
    out = tmp_path / "report.json"
    r = plan(write(tmp_path, SCENARIO), "--format", "json", "-o", out)
    assert r.exit_code == 0
    assert json.loads(out.read_text())["physicalGPUs"] == 32
    assert r.stdout == ""


def test_invalid_spec_exits_1_with_diagnostics_on_stderr(tmp_path):
    text = edit(BASE, "alpha-ns: {training: 8,", "alpha-ns: {training: 9,")
    r = plan(write(tmp_path, text))
    assert r.exit_code == 1
    assert "GP410" in r.stderr and "quota 9 nvidia.com/gpu on tier training exceeds capacity 8" in r.stderr
    assert r.stdout == ""
    r = plan(write(tmp_path, "kind: Fleet\n", "broken.yaml"))
    assert r.exit_code == 1 and "GP1" in r.stderr


@pytest.mark.slow
def test_real_entry_point(tmp_path, gpuplan_cli):
    p = gpuplan_cli("plan", str(write(tmp_path, SCENARIO)), "--format", "markdown")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("# Capacity: platform")
    p = gpuplan_cli("plan", str(write(tmp_path, edit(BASE, "replicas: 4}", "replicas: 1}"), "bad.yaml")))
    assert p.returncode == 1 and "GP301" in p.stderr and "Traceback" not in p.stderr


BASE_NEW = edit(edit(edit(edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 1, 1g.10gb: 4}"),
                          "nodes: [n4]", "nodes: [n4, n5]"), "notebooks: 16}", "notebooks: 24}"),
                "priority: 10, preemption: Never", "priority: 20, preemption: Never")


def test_base_diff(tmp_path):
    old, new = write(tmp_path, BASE, "old.yaml"), write(tmp_path, BASE_NEW, "new.yaml")
    r = plan(new, "--base", old)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "physical GPUs 16 -> 20 (+4); cost/month 23,360.00 -> 29,200.00 (+5,840.00)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("pool ", "tier ", "tenant "))]
    assert ["pool", "dev", "changed", "cost/month", "5,840.00", "11,680.00", "+5,840.00"] in rows
    assert ["tier", "notebooks", "changed", "quota", "16", "24", "+8"] in rows
    assert ["tenant", "alpha", "changed", "cost/month", "18,980.00", "21,900.00", "+2,920.00"] in rows
    assert not any(r[1] == "training" for r in rows)  # unchanged tiers are left out
    assert ("node n3 (pool infer): GPUs 0, 1, 2, 3 change MIG state — drained: every GPU {1g.10gb: 7} -> "
            "every GPU {1g.10gb: 4, 3g.40gb: 1}") in out
    assert "tier notebooks: PriorityClass 10/Never -> 20/Never" in out
    assert "n4" not in out.split("Disruptive changes:")[1]  # unchanged nodes are not drained
    data = json.loads(plan(new, "--base", old, "--format", "json").stdout)["diff"]
    assert data["drains"] == [{"node": "n3", "pool": "infer", "gpus": [0, 1, 2, 3],
                               "old": [{"1g.10gb": 7}] * 4, "new": [{"1g.10gb": 4, "3g.40gb": 1}] * 4}]
    assert data["costPerMonth"] == {"old": 23360.0, "new": 29200.0, "delta": 5840.0}


def test_base_invalid(tmp_path):
    r = plan(write(tmp_path, BASE), "--base", write(tmp_path, "kind: Fleet\n", "old.yaml"))
    assert r.exit_code == 1 and "base spec" in r.stderr


OPT = edit(edit(BASE, "    - {name: notebooks,",
                "    - {name: large, pool: infer, profile: 3g.40gb, workload: inference, priority: 5000}\n"
                "    - {name: notebooks,"),
           "alpha-ns: {training: 8, serve: 8, notebooks: 16}", "alpha-ns: {training: 8, serve: 8, large: 2, notebooks: 16}")


def test_optimise_flow_style(tmp_path):
    spec = write(tmp_path, OPT)
    # without --optimise the spec is invalid: 3g.40gb is not in the layout
    assert plan(spec).exit_code == 1
    r = plan(spec, "--optimise")
    assert r.exit_code == 0, r.output
    out = r.stdout
    # per node: 8 × 1g.10gb + 2 × 3g.40gb fit on 2 GPUs of {3g.40gb: 1, 1g.10gb: 4}; GPUs 2 and 3 keep theirs
    assert "-      sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n" in out
    assert ("+      sharing: {mode: mig, strategy: mixed, devices: [{devices: [0, 1], layout: {3g.40gb: 1, "
            "1g.10gb: 4}}, {devices: [2, 3], layout: {1g.10gb: 7}}]}\n") in out
    assert "GPUs 0, 1 change on every node (2 GPUs, 1 node drained)" in out
    # the diff applies and the result is valid
    import subprocess

    diff = out[out.index("--- a/"):]
    patched = tmp_path / "patched"
    patched.mkdir()
    (patched / "fleet.yaml").write_text(OPT)
    header_path = diff.splitlines()[0][len("--- "):]
    p = subprocess.run(["patch", "-p0", str(patched / "fleet.yaml")], input=diff, text=True,
                       capture_output=True)
    assert p.returncode == 0, (header_path, p.stdout, p.stderr)
    assert plan(patched / "fleet.yaml").exit_code == 0


def test_optimise_block_style_and_nothing_to_do(tmp_path):
    block = OPT.replace("sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}",
                        "sharing:\n        mode: mig\n        layout:\n          1g.10gb: 7\n        strategy: mixed")
    r = plan(write(tmp_path, block), "--optimise")
    assert r.exit_code == 0, r.output
    assert ("-        layout:\n-          1g.10gb: 7\n+        devices:\n"
            "+          - {devices: [0, 1], layout: {3g.40gb: 1, 1g.10gb: 4}}\n"
            "+          - {devices: [2, 3], layout: {1g.10gb: 7}}\n         strategy: mixed\n") in r.stdout
    r = plan(write(tmp_path, BASE, "fits.yaml"), "--optimise")
    assert r.exit_code == 0
    assert "pool infer: demand {1g.10gb: 8} fits the current layout; no change" in r.stdout
    assert "no change to fleet.yaml proposed" in r.stdout


def test_optimise_uniform_layout_and_errors_left(tmp_path):
    # 8 × 3g.40gb on one node of 4 GPUs: every GPU gets {3g.40gb: 2}; serve (1g.10gb, no quota) loses its profile
    text = edit(edit(OPT, "large: 2,", "large: 8,"), "serve: 8,", "serve: 0,")
    r = plan(write(tmp_path, text), "--optimise")
    assert "+      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}\n" in r.stdout
    assert r.exit_code == 1
    assert "the proposed layouts still leave errors" in r.stderr and "GP402" in r.stderr


def test_optimise_infeasible_demand(tmp_path):
    # 16 × 3g.40gb cannot fit 4 GPUs (at most 2 per GPU)
    r = plan(write(tmp_path, edit(OPT, "large: 2,", "large: 16,")), "--optimise")
    assert r.exit_code == 1
    assert "pool infer:" in r.stdout and "no change to fleet.yaml proposed" in r.stdout
    assert "found no layouts that fix the errors" in r.stderr


def test_capacity_md_in_build_output(tmp_path):
    from gpuplan.compiler import render_files
    from tests.report.helpers import resolved

    files = render_files(resolved(tmp_path, SCENARIO), "fleet.yaml")
    text = files["CAPACITY.md"].decode()
    assert text.startswith("<!-- generated by gpuplan from fleet.yaml; do not edit -->\n# Capacity: platform")
    assert "| inference | infer | nvidia.com/mig-3g.40gb | 12 | 16 | 0.75× |" in text
    again = render_files(resolved(tmp_path, SCENARIO, "again.yaml"), "fleet.yaml")
    assert files["CAPACITY.md"] == again["CAPACITY.md"]
