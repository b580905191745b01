"""#28 item 2 (remainder): the driver an EKS AL2023 AMI release ships, from the AMI release
notes (awslabs/amazon-eks-ami CHANGELOG.md, ``kmod-nvidia-latest-dkms`` rows), against the
GPU's driver floor (GP650) for Karpenter pools; an AMI release the table does not know is
GP655 (info), never an error."""

from __future__ import annotations

from pathlib import Path

from gpuplan.catalog.build_ami_drivers import parse
from gpuplan.catalog.drivers import ami_driver, ami_driver_source
from gpuplan.compiler import check_fleet

from test_karpenter_output import spec_file

B200 = ("    - name: b200\n      gpu: B200\n      karpenter: {instanceTypes: [p6-b200.48xlarge], maxGPUs: 16, "
        "amiFamily: %s, amiVersion: %s}\n")


def _codes(tmp_path: Path, family: str, version: str) -> list:
    r = check_fleet(spec_file(tmp_path, B200 % (family, version)))
    return [d for d in r.diagnostics if d.code in ("GP650", "GP655")]


def test_table_is_pinned_with_its_source() -> None:
    src = ami_driver_source()
    assert src["repository"] == "awslabs/amazon-eks-ami" and len(src["commit"]) == 40
    assert ami_driver("AL2023", "v20260714") == "580.159.03"
    assert ami_driver("AL2023", "v20250920") == "550.163.01"
    assert ami_driver("Bottlerocket", "v1.40.0") is None


def test_parse_reads_the_x86_and_arm_columns() -> None:
    text = ("# AMI Release v20990101\n<table><tr>\n<td>kmod-nvidia-latest-dkms</td>\n"
            '<td colspan="1">580.10.01-1.amzn2023</td>\n<td colspan="2">—</td>\n'
            '<td colspan="1">580.9.02-1.el9</td>\n</tr></table>\n'
            "# AMI Release v20981231\n<tr><td>nvidia-driver-latest-dkms</td><td>470.1.1-1</td></tr>\n")
    assert parse(text) == {"v20990101": "580.9.02"}  # AL2's package row is not AL2023's


def test_b200_on_an_ami_with_a_550_driver_is_refused_at_its_line(tmp_path: Path) -> None:
    found = _codes(tmp_path, "AL2023", "v20250920")
    assert [(d.code, d.path) for d in found] == [("GP650", "spec.pools[0].karpenter.amiVersion")]
    assert "550.163.01" in found[0].message and "570.86.15" in found[0].message
    assert found[0].is_error


def test_b200_on_an_ami_with_a_580_driver_passes(tmp_path: Path) -> None:
    assert _codes(tmp_path, "AL2023", "v20260714") == []


def test_unknown_release_and_bottlerocket_are_unchecked_not_errors(tmp_path: Path) -> None:
    for sub, family, version in (("a", "AL2023", "v20991231"), ("b", "Bottlerocket", "v1.40.0")):
        (tmp_path / sub).mkdir()
        found = _codes(tmp_path / sub, family, version)
        assert [(d.code, d.severity.value) for d in found] == [("GP655", "info")], family
