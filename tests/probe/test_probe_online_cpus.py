"""The node's online CPUs (sysfs, not NVML) in the inventory: what the kubelet checks
reservedSystemCPUs against."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_support import fixture_path, probe_fixture
from gpuplan.probe.collect import ONLINE_CPUS, read_online_cpus
from gpuplan.rules.topology import parse_cpuset


@pytest.mark.parametrize("name,online", [("h100-sxm-8x", "0-223"), ("t4", "0-3"), ("a100-pcie-4x", "0-127")])
def test_fixture_online_cpus_reach_the_inventory(name, online):
    inv, _ = probe_fixture(name)
    assert inv.system.online_cpus == online
    # every GPU's CPU affinity lies within the online CPUs, as on the machine modelled
    cpus = parse_cpuset(online)
    for g in inv.gpus:
        for a, b in parse_cpuset(g.cpu_affinity) if g.cpu_affinity else ():
            assert any(x <= a and b <= y for x, y in cpus)


def test_cli_fake_writes_online_cpus():
    r = subprocess.run([sys.executable, "-m", "gpuplan", "probe", "--fake", str(fixture_path("h100-sxm-8x"))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "  onlineCpus: 0-223\n" in r.stdout


@pytest.mark.parametrize("content,expected", [
    ("0-3\n", "0-3"), ("0-1,3-4\n", "0-1,3-4"), ("0\n", "0"),
    ("3-1\n", None), ("", None), ("cpu0\n", None), (b"\xff\n", None),
])
def test_read_online_cpus(tmp_path: Path, content, expected):
    p = tmp_path / "online"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert read_online_cpus(str(p)) == expected


def test_missing_sysfs_file_is_none(tmp_path: Path):
    assert read_online_cpus(str(tmp_path / "absent")) is None


@pytest.mark.skipif(not os.path.exists(ONLINE_CPUS), reason="no sysfs CPU list on this OS")
def test_this_machines_online_cpus():
    text = read_online_cpus()
    assert text is not None
    assert sum(b - a + 1 for a, b in parse_cpuset(text)) == os.cpu_count()
