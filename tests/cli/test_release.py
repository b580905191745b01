"""The version users pin: `gpuplan --version`, the changelog and the README's pins agree."""

from __future__ import annotations

import importlib.metadata
import re

import gpuplan
from tests.conftest import REPO, run_gpuplan

TAG = re.compile(r"v(\d+\.\d+\.\d+)")


def test_version_flag_prints_the_package_version():
    r = run_gpuplan("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"gpuplan, version {importlib.metadata.version('gpuplan')}\n"
    assert importlib.metadata.version("gpuplan") == gpuplan.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", gpuplan.__version__)


def _released() -> list[str]:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert heads[0] == "Unreleased", "the changelog starts with an Unreleased section"
    for v in heads[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", v), v
        assert f"[{v}]: https://github.com/gpuplan/gpuplan/releases/tag/v{v}" in text
    return heads[1:]


def test_changelog_has_the_current_version():
    assert gpuplan.__version__ in _released()


def test_readme_pins_the_action_and_hooks_to_the_latest_release_tag():
    latest = _released()[0]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    uses = re.findall(r"uses: gpuplan/gpuplan@(\S+)", readme)
    revs = re.findall(r"rev: (\S+)", readme)
    schemas = re.findall(r"raw\.githubusercontent\.com/gpuplan/gpuplan/([^/]+)/schemas/fleet\.schema\.json", readme)
    assert uses and revs and schemas
    assert set(uses) == set(revs) == set(schemas) == {f"v{latest}"}
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert set(re.findall(r"rev: (\S+)", hooks)) == {f"v{latest}"}
