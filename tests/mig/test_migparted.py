"""`gpuplan mig check --mig-parted FILE`: NVIDIA's shipped configs pass; broken files fail with positions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplan.cli.mig import mig
from gpuplan.diagnostics import Severity
from gpuplan.mig.migparted import check_mig_parted_file, check_mig_parted_text

DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(mig, ["check", *args], catch_exceptions=False)


def test_nvidia_shipped_configs_pass_on_the_gpus_they_target():
    report = check_mig_parted_file(DATA / "nvidia-default-subset.yaml")
    assert report.ok and report.diagnostics == ()
    assert (report.configs, report.entries) == (15, 24)
    checked = {(c, m) for c, _, m, ok in report.checked if ok}
    assert all(ok for *_, ok in report.checked)
    # device-filters resolve to the boards they name ...
    assert {m for c, m in checked if c == "all-balanced"} >= {
        "GB200", "B200", "H200-SXM-141GB", "H200-NVL-141GB", "H100-NVL-94GB", "H800-NVL-94GB", "H100-SXM5-80GB",
        "A100-SXM4-80GB", "A800-PCIE-80GB", "A100-SXM4-40GB", "A30", "GH200-96GB", "H20", "PG506-96GB",
        "RTX-PRO-6000-BLACKWELL-SERVER"}
    # ... and entries without a filter go to every model that has their profiles
    assert {m for c, m in checked if c == "all-2g.24gb"} == {
        "H100-NVL-94GB", "H100-SXM5-94GB", "H800-NVL-94GB", "GH200-96GB", "H100-96GB", "PG506-96GB", "H20"}
    assert {m for c, m in checked if c == "all-1g.24gb.me.all"} == {
        "RTX-PRO-6000-BLACKWELL-SERVER", "RTX-PRO-6000-BLACKWELL-WS", "RTX-PRO-6000-BLACKWELL-MAXQ",
        "RTX-PRO-5000-BLACKWELL"}
    r = run("--mig-parted", str(DATA / "nvidia-default-subset.yaml"))
    assert r.exit_code == 0
    assert r.output.strip().endswith("ok: 15 configs, 24 entries, 0 errors, 0 warnings")


def test_geometry_errors_point_at_the_entry():
    path = str(DATA / "geometry-errors.yaml")
    r = run("--mig-parted", path)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith(f"{path}:4:7: error GP204: config 'three-three-one' entry 1 cannot be created on "
                               "A100-SXM4-40GB, A100-PCIE-40GB: 2×3g.20gb + 1g.5gb needs 9 memory slices")
    assert lines[1].startswith("  hint: nearest creatable: 2×3g.20gb;")
    assert any(l.startswith(f"{path}:11:7: error GP204: config 'four-two-two'") for l in lines)
    assert any(l.startswith(f"{path}:23:7: error GP203: config 'fine-and-broken' entry 2") for l in lines)
    assert any(l.startswith(f"{path}:30:7: error GP206: config 'whole-gpu-on-t4'") for l in lines)
    assert not any(":18:7:" in l for l in lines)  # the 7g.80gb entry is fine
    assert "Traceback" not in r.output


def test_early_gb200_names_fail_with_a_did_you_mean():
    r = run("--mig-parted", str(DATA / "early-gb200.yaml"))
    assert r.exit_code == 1
    assert ":6:7: error GP201: config 'all-1g.24gb' entry 1 cannot be created on GB200" in r.output
    assert "did you mean 1g.23gb" in r.output and "7×1g.23gb" in r.output


def test_schema_errors_have_positions():
    report = check_mig_parted_file(DATA / "schema-errors.yaml")
    got = {(d.line, d.col, d.code) for d in report.diagnostics}
    assert got == {
        (2, 1, "GP207"),    # unknown top-level key
        (7, 7, "GP207"),    # mig-devices with mig-enabled: false
        (10, 7, "GP207"),   # no mig-devices
        (12, 7, "GP207"),   # unknown entry key mig-device
        (15, 22, "GP207"),  # device-filter "A100"
        (16, 16, "GP207"),  # devices: some
        (17, 20, "GP207"),  # mig-enabled: "yes"
        (22, 9, "GP207"),   # "1g.10"
        (23, 20, "GP207"),  # count -1
        (24, 3, "GP207"),   # empty config
    }
    msgs = " | ".join(d.message for d in report.diagnostics)
    assert "mig-devices with mig-enabled: false" in msgs and "unknown key 'mig-device'" in msgs


def test_configmap_positions_map_into_the_embedded_config():
    path = str(DATA / "configmap.yaml")
    r = run("--mig-parted", path)
    assert r.exit_code == 1
    assert r.output.startswith(f"{path}:22:11: error GP204: config 'broken' entry 1 cannot be created on "
                               "H100-SXM5-80GB")
    assert "'inference'" not in r.output


def test_configmap_without_config_yaml_key():
    r = run("--mig-parted", str(DATA / "configmap-wrong-key.yaml"))
    assert r.exit_code == 1 and ":5:1: error GP207: ConfigMap has no data key 'config.yaml'" in r.output


def test_yaml_syntax_error_is_reported_not_raised():
    r = run("--mig-parted", str(DATA / "broken-yaml.yaml"))
    assert r.exit_code == 1 and "error GP207: YAML error" in r.output and "Traceback" not in r.output


def test_unknown_device_filter_is_a_warning_only():
    text = ("version: v1\nmig-configs:\n  x:\n    - device-filter: [\"0xFFFF10DE\", \"0x20B010DE\"]\n"
            "      devices: all\n      mig-enabled: true\n      mig-devices:\n        \"1g.5gb\": 7\n")
    report = check_mig_parted_text(text, "x.yaml")
    assert report.ok
    (d,) = report.diagnostics
    assert (d.code, d.severity.value, d.line, d.col) == ("GP208", "warning", 4, 23)


def test_no_filter_and_no_model_with_all_profiles():
    text = ("version: v1\nmig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n"
            "      mig-devices:\n        \"1g.5gb\": 1\n        \"1g.10gb+me\": 1\n")
    (d,) = check_mig_parted_text(text, "x.yaml").diagnostics
    assert (d.code, d.line, d.col) == ("GP201", 4, 7) and "no MIG GPU" in d.message


def test_driver_option_applies_to_files():
    text = ("version: v1\nmig-configs:\n  x:\n    - device-filter: \"0x20B010DE\"\n      devices: all\n"
            "      mig-enabled: true\n      mig-devices:\n        \"4g.20gb\": 1\n        \"3g.20gb\": 1\n")
    assert check_mig_parted_text(text).ok
    (d,) = check_mig_parted_text(text, driver="R470").diagnostics
    assert d.code == "GP205"


def test_json_output(tmp_path):
    r = run("--mig-parted", str(DATA / "early-gb200.yaml"), "--json")
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["ok"] is False and data["diagnostics"][0]["code"] == "GP201"
    assert (data["diagnostics"][0]["line"], data["diagnostics"][0]["col"]) == (6, 7)


@pytest.mark.parametrize("args", [["--mig-parted", "/nonexistent/file.yaml"],
                                  ["A100-SXM4-40GB", "1g.5gb", "--mig-parted", "x.yaml"]])
def test_usage_errors(args):
    r = CliRunner().invoke(mig, ["check", *args])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output


VENDOR = Path(__file__).parent / "data" / "upstream"


@pytest.mark.parametrize("name", ["mig-parted-v0.15.0-examples-config.yaml",
                                  "mig-parted-v0.15.0-config-default.yaml"])
def test_nvidia_shipped_configs_are_accepted(name):
    """Never reject the vendor's own file: entries without device-filter that do not fit
    some GPU are warnings (GP213), profiles newer than the catalog are warnings (GP214)."""
    report = check_mig_parted_file(VENDOR / name)
    errors = [d for d in report.diagnostics if d.severity is Severity.ERROR]
    assert errors == [], errors
    assert report.configs >= 9 and report.checked


def test_unfiltered_config_warns_where_it_cannot_be_created():
    report = check_mig_parted_file(VENDOR / "mig-parted-v0.15.0-config-default.yaml")
    w = [d for d in report.diagnostics if d.code == "GP213" and "'all-1g.24gb'" in d.message]
    assert len(w) == 1
    assert "RTX-PRO-5000-BLACKWELL" in w[0].message and "device-filter" in w[0].hint
    assert w[0].line == 203 and w[0].col == 7


def test_unfiltered_config_fitting_no_gpu_is_still_an_error():
    text = "version: v1\nmig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n" \
           "      mig-devices: {1g.10gb: 8}\n"
    report = check_mig_parted_text(text)
    codes = {d.code for d in report.diagnostics}
    assert codes == {"GP202"}  # one error per GPU table that has 1g.10gb; no GP213 warnings


def test_profile_unknown_to_catalog_is_a_warning_with_a_guess():
    text = "version: v1\nmig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n" \
           "      mig-devices: {7g.81gb: 1}\n"
    report = check_mig_parted_text(text)
    (d,) = report.diagnostics
    assert d.code == "GP214" and d.severity is Severity.WARNING
    assert "7g.80gb" in d.hint


def test_cli_accepts_the_vendor_file():
    r = CliRunner().invoke(mig, ["check", "--mig-parted", str(VENDOR / "mig-parted-v0.15.0-config-default.yaml")])
    assert r.exit_code == 0, r.output
    assert "0 errors" in r.output and "GP213" in r.output
