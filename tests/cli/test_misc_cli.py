"""explain, the codes reference page, --help, and a lean validate path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuplan.codes import all_codes
from tests.conftest import REPO, run_gpuplan


def test_codes_reference_is_current():
    r = run_gpuplan("explain", "--markdown")
    assert r.returncode == 0
    assert r.stdout == (REPO / "docs" / "codes.md").read_text(), \
        "docs/codes.md is stale: run `gpuplan explain --markdown > docs/codes.md`"


def test_every_code_is_documented_and_well_formed():
    codes = all_codes()
    assert len(codes) >= 40
    families = {c[:3] for c in codes}
    assert {"GP0", "GP1", "GP2", "GP3", "GP4", "GP5", "GP6", "GP7", "GP8"} <= families
    for c in codes.values():
        assert c.code.startswith("GP") and len(c.code) == 5
        assert c.title and c.summary
        # rules (not reading/internal errors) show a bad and a good example
        if c.code[:3] not in ("GP0", "GP9", "GP8"):
            assert c.bad and c.good, c.code


def test_explain_one_code():
    r = run_gpuplan("explain", "gp204")
    assert r.returncode == 0
    assert r.stdout.startswith("GP204: MIG layout cannot be placed (error)")
    assert "Bad:" in r.stdout and "Good:" in r.stdout


def test_explain_unknown_code_is_usage_error():
    r = run_gpuplan("explain", "GP2O4")
    assert r.returncode == 2
    assert r.stderr == "gpuplan: unknown code 'GP2O4'; did you mean 'GP204'?\n"


def test_help_lists_commands_without_importing_them():
    r = run_gpuplan("--help")
    assert r.returncode == 0
    for cmd in ("validate", "build", "check", "diff", "plan", "mig", "probe", "schema", "explain"):
        assert f"  {cmd} " in r.stdout


@pytest.mark.slow
def test_validate_keeps_heavy_modules_out():
    code = (
        "import sys\n"
        "from gpuplan.cli.main import main\n"
        "try:\n"
        "    main(['validate', 'examples/fleet.yaml'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "heavy = [m for m in ('jinja2', 'jsonschema', 'highspy', 'scipy', 'pynvml', 'numpy', 'yaml') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "HEAVY="


@pytest.mark.slow
def test_internal_errors_exit_4_without_traceback_unless_debug(tmp_path, monkeypatch):
    # a plugin-free way to hit an internal error: a rule module that raises
    pkg = tmp_path / "gpuplan_boom"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    code = (
        "import sys, gpuplan.rules.registry as r\n"
        "r.RULE_MODULES = r.RULE_MODULES + ('gpuplan_boom.bad',)\n"
        "import types; m = types.ModuleType('gpuplan_boom.bad')\n"
        "def check(rf): raise RuntimeError('boom')\n"
        "m.check = check; sys.modules['gpuplan_boom.bad'] = m\n"
        "from gpuplan.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    r = subprocess.run([sys.executable, "-c", code, "validate", "examples/fleet.yaml"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 4
    assert "internal error (RuntimeError: boom)" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-c", code, "--debug", "validate", "examples/fleet.yaml"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 4 and "Traceback" in r.stderr
