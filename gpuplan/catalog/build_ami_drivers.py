"""Generate ``gpuplan/catalog/ami_drivers.json``: the NVIDIA driver each EKS AL2023 AMI
release ships.

    python -m gpuplan.catalog.build_ami_drivers PATH/TO/amazon-eks-ami

The source is the AMI's own release notes, ``CHANGELOG.md`` of ``awslabs/amazon-eks-ami``:
each ``# AMI Release vYYYYMMDD`` section has, per Kubernetes minor, a package table whose
``kmod-nvidia-latest-dkms`` row gives the driver of the ``AL2023_x86_64_NVIDIA`` and
``AL2023_ARM_64_NVIDIA`` AMIs. The script records, per release, the lowest driver version any
of its NVIDIA AMIs ships (they agree in every release read so far). Bottlerocket is not in these
notes: its pools stay unchecked.

Run it against a clone; it writes the JSON and prints one line per release.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from gpuplan.catalog.build_drivers import _git, run, version_key

SCHEMA_VERSION = 1
OUT = Path(__file__).with_name("ami_drivers.json")
REPOSITORY = "awslabs/amazon-eks-ami"
PATH = "CHANGELOG.md"
_RELEASE = re.compile(r"^# AMI Release (v[0-9]{8})\s*$", re.M)
_ROW = re.compile(r"<tr>\s*<td>kmod-nvidia[a-z-]*-dkms</td>(.*?)</tr>", re.S)
_CELL = re.compile(r"<td(?: colspan=\"([0-9]+)\")?>([^<]*)</td>")
_DRIVER = re.compile(r"([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)-")


def parse(text: str) -> dict[str, str]:
    """{release: lowest NVIDIA driver any of its AMIs ships}."""
    out: dict[str, str] = {}
    marks = list(_RELEASE.finditer(text))
    for i, m in enumerate(marks):
        body = text[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        found = [d[1] for row in _ROW.finditer(body) for _, cell in _CELL.findall(row[1])
                 if (d := _DRIVER.match(cell.strip()))]
        if found:
            out[m[1]] = min(found, key=version_key)
    return out


def build(repo: Path) -> dict[str, Any]:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    releases = parse(_git(repo, "show", f"{commit}:{PATH}"))
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "gpuplan/catalog/build_ami_drivers.py",
        "source": {"repository": REPOSITORY, "path": f"{PATH} (kmod-nvidia-latest-dkms rows)", "commit": commit,
                   "commit_date": _git(repo, "show", "-s", "--format=%cs", commit).strip(),
                   "oldest_release": min(releases), "newest_release": max(releases)},
        "al2023": dict(sorted(releases.items())),
    }


def main(argv: list[str]) -> int:
    return run(argv, __doc__ or "", build, OUT,
               lambda data: [f"{rel}: {drv}" for rel, drv in data["al2023"].items()])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
