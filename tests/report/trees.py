"""A real generated tree to make hostile: examples/fleet.yaml built into a scratch
repository, and its files read and written back as YAML documents."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gpuplan.cli.main import cli
from tests.conftest import REPO


def build_example(root: Path, example: str = "fleet.yaml") -> Path:
    """``root``/fleet.yaml (an example spec) built into ``root``/generated; returns the tree."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "examples" / example, root / "fleet.yaml")
    r = CliRunner().invoke(cli, ["build", str(root / "fleet.yaml"), "-o", str(root / "generated")])
    assert r.exit_code == 0, r.output
    return root / "generated"


def docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def write_docs(path: Path, documents: list[Any]) -> None:
    path.write_text(yaml.safe_dump_all(documents, allow_unicode=True, sort_keys=False), encoding="utf-8")


def diff(fleet: Path, old: Path, *extra: str):
    """`gpuplan diff FLEET --old OLD` in this process."""
    return CliRunner().invoke(cli, ["diff", str(fleet), "-o", str(fleet.parent / "generated"), "--old", str(old),
                                    *extra])
