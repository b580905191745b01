"""Shared helpers for the probe tests (a uniquely named module, so it never
clashes with other test packages' conftest.py): run the probe on a fixture
through the fake."""

from __future__ import annotations

from pathlib import Path

from gpuplan.probe.collect import probe_node
from gpuplan.probe.fake import FakeNvml, load_fake
from gpuplan.probe.inventory import NodeInventory

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parent.parent
SCHEMA_PATH = REPO / "schemas" / "inventory.schema.json"

GPU_FIXTURES = ["h100-sxm-8x", "a100-pcie-4x", "a100-mig", "t4", "t4-refusing", "no-gpus"]


def fixture_path(name: str) -> Path:
    return FIXTURES / f"{name}.yaml"


def run_probe(fake: FakeNvml) -> NodeInventory:
    return probe_node(
        fake,
        node_name=fake.node.get("name", "test-node"),
        hostname=fake.node.get("hostname", "test-node"),
        version="0.1.0",
        source="fake",
        online_cpus=fake.node.get("onlineCpus"),  # read from sysfs by the CLI, not through NVML
    )


def probe_fixture(name: str) -> tuple[NodeInventory, FakeNvml]:
    fake = load_fake(fixture_path(name))
    return run_probe(fake), fake
