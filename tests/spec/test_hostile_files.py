"""Hostile files: each input is built here. What must hold: every read is of a
regular file and bounded, inventory paths stay inside the repository, the
reporter quotes only what the run legitimately read, values cannot forge
output lines, and the number of diagnostics is capped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuplan.compiler import Options, check_fleet
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.reporters.formats import MAX_SHOWN, render
from tests.conftest import REPO, finishes, run_gpuplan

MINIMAL = (REPO / "tests" / "spec" / "valid" / "minimal.yaml").read_text()


def _spec(tmp_path: Path, inventory: list[str] | None = None, extra: str = "") -> Path:
    text = MINIMAL + extra
    if inventory is not None:
        text = text.replace("  pools:\n", f"  inventory: {json.dumps(inventory)}\n  pools:\n", 1)
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    return p


# --- only regular files, bounded reads ----------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_non_regular_spec_is_refused_within_a_second(tmp_path, kind):
    if kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "fifo":
        path = str(tmp_path / "fleet.yaml")
        os.mkfifo(path)  # no writer: a plain open() would wait forever
    else:
        path = str(tmp_path)
    (d,) = finishes(lambda: check_fleet(path)).diagnostics
    assert d.code == "GP013" and "not a regular file" in d.message or "is a directory" in d.message


@pytest.mark.slow
def test_dev_zero_and_fifo_through_the_cli_are_clear_errors(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, what in (("/dev/zero", "a device"), (str(fifo), "a FIFO (named pipe)")):
        r = run_gpuplan("validate", path, timeout=20)
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(f"{path}: error[GP013]: {path} is {what}, not a regular file"), r.stderr
        assert "Traceback" not in r.stderr


def test_the_reporter_quotes_the_lines_the_loader_read_and_opens_no_file(tmp_path, monkeypatch):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(MINIMAL.replace("gpusPerNode: 4", "gpusPerNode: four"))
    checked = check_fleet(spec)
    import builtins

    def no_open(*a, **k):
        raise AssertionError("the reporter opened a file")

    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    text = render("text", checked.diagnostics, sources=checked.sources)
    assert "11 |       gpusPerNode: four" in text
    # a file the run did not read as a source is never quoted
    assert "|" not in render("text", [Diagnostic("GP999", Severity.ERROR, "x", file=str(spec), line=1, col=1)])


# --- inventory paths stay inside the repository -------------------------------


def _secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "credentials.yaml").write_text("aws_secret_access_key: AKIA-TOP-SECRET\n")
    return outside


@pytest.mark.parametrize("entry", ["/etc/*", "ETC", "../outside/*.yaml", "inventory/../../outside/", "~/.aws/*"])
def test_inventory_outside_the_repository_is_refused_and_never_read(tmp_path, entry):
    outside = _secret(tmp_path)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "inventory").mkdir()
    entry = str(outside / "*") if entry == "ETC" else entry
    spec = _spec(repo, [entry])
    r = run_gpuplan("validate", str(spec))
    assert r.returncode == 1
    assert "error[GP720]" in r.stderr and "refused" in r.stderr
    assert "AKIA" not in r.stderr and "AKIA" not in r.stdout


@pytest.mark.parametrize("entry", [".git/config", ".git/", "inventory/../.git/config", "gitlink/config"])
def test_inventory_inside_dot_git_is_refused_and_never_quoted(tmp_path, entry):
    """actions/checkout keeps the job's token in .git/config: an inventory entry there would
    have its lines quoted in the pull request's annotations."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic TOKEN-SECRET\n")
    (repo / "inventory").mkdir()
    os.symlink(repo / ".git", repo / "gitlink")
    checked = check_fleet(_spec(repo, [entry]))
    assert [d.code for d in checked.diagnostics if d.is_error] == ["GP720"]
    assert all("TOKEN-SECRET" not in v for v in checked.sources.values())


def test_symlink_out_of_the_repository_is_refused(tmp_path):
    outside = _secret(tmp_path)
    repo = tmp_path / "repo"
    (repo / "inventory").mkdir(parents=True)
    (repo / ".git").mkdir()
    os.symlink(outside / "credentials.yaml", repo / "inventory" / "node.yaml")
    checked = check_fleet(_spec(repo, ["inventory/"]))
    assert [d.code for d in checked.diagnostics if d.is_error] == ["GP720"]
    assert "symlink that leads out of the repository" in checked.diagnostics[0].message
    assert all("AKIA" not in v for v in checked.sources.values())


def test_outside_inventory_is_read_only_with_the_explicit_flag(tmp_path):
    outside = _secret(tmp_path)
    spec = _spec(tmp_path / "repo" if (tmp_path / "repo").mkdir() is None else tmp_path, [str(outside / "*.yaml")])
    checked = check_fleet(spec, options=Options(allow_inventory_outside=True))
    assert "GP720" not in {d.code for d in checked.diagnostics}
    assert {d.code for d in checked.diagnostics if d.is_error} == {"GP703"}  # read, and not an inventory


def test_spec_in_a_subdirectory_may_name_inventory_elsewhere_in_its_repository(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "bad.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    (tmp_path / "fleets").mkdir()
    checked = check_fleet(_spec(tmp_path / "fleets", ["../inventory/"]))
    assert [d.code for d in checked.diagnostics if d.is_error] == ["GP703"]


# --- the directory form and patterns that match nothing ----------------------


def test_inventory_directory_form_loads_its_files(tmp_path):
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "gpu-1.yaml").write_text("apiVersion: gpuplan.dev/v1alpha1\nkind: NodeInventory\n"
                                                       "metadata: {name: gpu-1}\n")
    checked = check_fleet(_spec(tmp_path, ["inventory/"]))
    errors = [d for d in checked.diagnostics if d.is_error]
    assert errors and {d.code for d in errors} == {"GP704"}  # the real error no longer disappears
    assert errors[0].file.endswith("inventory/gpu-1.yaml")
    r = run_gpuplan("validate", str(tmp_path / "fleet.yaml"))
    assert r.stderr.startswith(f"{tmp_path}/inventory/gpu-1.yaml:1:1: error[GP704]: missing required key 'probe'\n"
                               "  |\n1 | apiVersion: gpuplan.dev/v1alpha1\n")  # the inventory's own line


def test_pattern_matching_nothing_is_a_warning_at_its_line(tmp_path):
    (tmp_path / "inventory").mkdir()
    checked = check_fleet(_spec(tmp_path, ["inventroy/*.yaml", "inventory/"]))
    warns = [d for d in checked.diagnostics if d.code == "GP721"]
    assert [(d.severity, d.line, d.path) for d in warns] == [
        (Severity.WARNING, 8, "spec.inventory[0]"), (Severity.WARNING, 8, "spec.inventory[1]")]
    assert "'inventroy/*.yaml' matches no inventory file" in warns[0].message


# --- values cannot forge output lines ----------------------------------------

FORGED = "x\n::warning::all checks passed\r\x1b[2K ##[add-mask]x"


@pytest.mark.parametrize("fmt", ["text", "github", "sarif"])
def test_a_value_with_a_workflow_command_is_escaped(fmt):
    d = Diagnostic("GP101", Severity.ERROR, f"unknown key {FORGED}", file=f"fleet{FORGED}.yaml", line=3, col=1,
                   path=f"spec.{FORGED}", hint=f"did you mean {FORGED}?")
    out = render(fmt, [d])
    assert "\x1b" not in out and "\r" not in out and "\u2028" not in out
    if fmt == "sarif":
        text = json.loads(out)["runs"][0]["results"][0]["message"]["text"]
        assert "\n" not in text and "\\n::warning::all checks passed" in text
    else:
        lines = out.splitlines()
        assert not any(line.lstrip().startswith("::warning") for line in lines), out
        if fmt == "github":
            assert len(lines) == 1 and lines[0].startswith("::error ")
        assert "\\n::warning::all checks passed\\r\\x1b[2K ##\\x5badd-mask]x" in out
    assert "##[" not in out  # the runner's legacy form counts anywhere in a line


@pytest.mark.slow
def test_hostile_key_in_a_spec_cannot_forge_a_line_in_any_format(tmp_path):
    spec = _spec(tmp_path, extra='      "k\\n::warning file=fleet.yaml::valid\\u2028": 1\n')
    for fmt in ("text", "github", "sarif"):
        r = run_gpuplan("validate", "--format", fmt, str(spec))
        assert r.returncode == 1
        for line in (r.stdout + r.stderr).splitlines():
            assert not line.lstrip().startswith("::warning"), (fmt, line)
        assert "\u2028" not in r.stdout + r.stderr


def test_file_name_cannot_start_a_workflow_command(tmp_path):
    d = Diagnostic("GP001", Severity.ERROR, "bad", file="::warning::x.yaml", line=1, col=1)
    assert render("text", [d]).startswith("./::warning::x.yaml:1:1: error[GP001]")


# --- bounded diagnostics ------------------------------------------------------


@pytest.mark.slow
def test_diagnostics_are_capped_with_one_more_line(tmp_path):
    keys = "".join(f"      k{i}: 1\n" for i in range(5000))  # in the pool
    spec = _spec(tmp_path, extra=keys)
    r = run_gpuplan("validate", "--format", "json", str(spec))
    diags = json.loads(r.stdout)["diagnostics"]
    assert len(diags) <= MAX_SHOWN + 1
    more = [d for d in diags if d["code"] == "GP016"]
    assert len(more) == 1 and more[0]["message"] == "4,900 more schema errors not listed"
    assert sum(d["code"] == "GP101" for d in diags) == 100
    r = run_gpuplan("validate", str(spec))
    assert r.stderr.count("error[GP101]") == 100 and "4,900 more schema errors not listed" in r.stderr


def test_reporter_caps_any_list_of_diagnostics():
    diags = [Diagnostic("GP707", Severity.WARNING, f"w{i}", file="f", line=i + 1) for i in range(MAX_SHOWN + 50)]
    out = render("json", diags)
    shown = json.loads(out)["diagnostics"]
    assert len(shown) == MAX_SHOWN + 1
    assert shown[-1]["code"] == "GP016" and shown[-1]["message"].startswith("50 more diagnostics not shown")


# --- several specs in one run (the pre-commit hook passes every staged one) ----


@pytest.mark.slow
def test_validate_takes_several_specs(tmp_path):
    a = tmp_path / "a" / "fleet.yaml"
    b = tmp_path / "b" / "fleet.yaml"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(MINIMAL)
    b.write_text(MINIMAL.replace("gpusPerNode: 4", "gpusPerNode: four"))
    r = run_gpuplan("validate", str(a), str(b))
    assert r.returncode == 1
    assert f"{a}: valid (1 pools, 0 tiers, 0 tenants)" in r.stdout
    assert f"{b}:11:" in r.stderr
    r = run_gpuplan("validate", str(a), str(a))
    assert r.returncode == 0 and r.stdout.count(": valid (") == 2
    r = run_gpuplan("validate", "--format", "json", str(b), str(b))  # one document for all specs
    assert r.returncode == 1 and len(json.loads(r.stdout)["diagnostics"]) == 2


def test_mig_parted_check_refuses_non_regular_files(tmp_path):
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    for path, what in (("/dev/zero", "a device"), (str(fifo), "a FIFO (named pipe)")):
        r = run_gpuplan("mig", "check", "--mig-parted", path, timeout=20)
        assert r.returncode == 2
        assert r.stderr == f"gpuplan mig check: error: cannot read {path}: {path} is {what}, not a regular file\n"


@pytest.mark.slow
def test_check_diff_cannot_carry_a_workflow_command(tmp_path):
    import shutil

    spec = tmp_path / "fleet.yaml"
    shutil.copy(REPO / "examples" / "fleet.yaml", spec)
    assert run_gpuplan("build", str(spec), "-o", str(tmp_path / "generated")).returncode == 0
    kust = tmp_path / "generated" / "kustomization.yaml"
    kust.write_text(kust.read_text() + "# ##[warning]forged\n# \x1b[2Kclean\n")
    r = run_gpuplan("check", str(spec), "-o", str(tmp_path / "generated"))
    assert r.returncode == 3
    assert "##[" not in r.stdout and "\x1b" not in r.stdout
    assert "-# ##\\x5bwarning]forged" in r.stdout and "-# \\x1b[2Kclean" in r.stdout
