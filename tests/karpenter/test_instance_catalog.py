"""The AWS instance catalog: which GPU an instance type really carries."""

from __future__ import annotations

import pytest

from gpuplan.catalog import resolve_gpu
from gpuplan.cloud.aws import (
    instance_gpu_model,
    instance_type,
    instance_types_for,
    suggest_instance_types,
)


@pytest.mark.parametrize("name,model,count,per_numa", [
    ("p4d.24xlarge", "A100-SXM4-40GB", 8, 4),
    ("p4de.24xlarge", "A100-SXM4-80GB", 8, 4),
    ("p5.48xlarge", "H100-SXM5-80GB", 8, 4),
    ("p5.4xlarge", "H100-SXM5-80GB", 1, 1),
    ("p5en.48xlarge", "H200-SXM-141GB", 8, 4),
    ("g4dn.4xlarge", "T4", 1, 1),
    ("g6e.12xlarge", "L40S", 4, 4),
    ("g5.48xlarge", "A10G", 8, 4),
    ("p3dn.24xlarge", "V100-SXM2-32GB", 8, 4),
])
def test_instance_gpu(name, model, count, per_numa) -> None:
    it = instance_type(name)
    assert it is not None
    assert instance_gpu_model(it).key == model
    assert it.gpu_count == count
    assert it.gpus_per_numa_node == per_numa


def test_describe() -> None:
    assert instance_type("g4dn.4xlarge").describe_gpus() == "1× T4 16GB"
    assert instance_type("p4de.24xlarge").describe_gpus() == "8× A100 80GB"
    assert instance_type("g6f.large").describe_gpus() == "no GPU Karpenter can count"


def test_nvlink_families() -> None:
    assert instance_type("p4d.24xlarge").nvlink and instance_type("p5.48xlarge").nvlink
    assert not instance_type("g6e.48xlarge").nvlink and not instance_type("g4dn.12xlarge").nvlink


def test_suggestions_and_lookup() -> None:
    assert instance_type("m5.large") is None
    assert suggest_instance_types("p4d.24xlarg")[0] == "p4d.24xlarge"
    assert [i.name for i in instance_types_for(resolve_gpu("A100-SXM4-80GB"))] == ["p4de.24xlarge"]
    assert instance_types_for(resolve_gpu("A100-PCIE-80GB")) == []
