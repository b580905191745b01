"""Every fixture through the fake NVML: the inventory validates against the
committed JSON Schema and the pydantic model, and says what the hardware is."""

from __future__ import annotations

import jsonschema
import pytest

from probe_support import GPU_FIXTURES, probe_fixture
from gpuplan.probe import facts
from gpuplan.probe.inventory import NodeInventory, dump_json, dump_yaml, to_document
from gpuplan.probe.reader import load_inventory


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_inventory_validates_against_schema_and_model(name, inventory_schema, tmp_path):
    inv, fake = probe_fixture(name)
    doc = to_document(inv)
    jsonschema.Draft202012Validator(inventory_schema).validate(doc)
    assert NodeInventory.model_validate(doc) == inv
    # and survives the trip through a file in both formats
    (tmp_path / "a.yaml").write_text(dump_yaml(inv))
    (tmp_path / "b.json").write_text(dump_json(inv).replace(inv.metadata.name, inv.metadata.name + "-json"))
    loaded, diags = load_inventory([tmp_path / "a.yaml", tmp_path / "b.json"])
    assert [d for d in diags if d.is_error] == []
    assert loaded[0] == inv
    assert loaded[1].gpus == inv.gpus
    assert fake.mutations == []


def test_schema_rejects_what_the_model_rejects(inventory_schema):
    inv, _ = probe_fixture("t4")
    doc = to_document(inv)
    doc["gpus"][0]["memoryMB"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(inventory_schema).validate(doc)
    doc = to_document(inv)
    doc["topology"]["matrix"] = [["NVLINK"]]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(inventory_schema).validate(doc)


def test_yaml_output_is_deterministic():
    a, _ = probe_fixture("a100-mig")
    b, _ = probe_fixture("a100-mig")
    assert dump_yaml(a) == dump_yaml(b)
    assert dump_json(a) == dump_json(b)


def test_h100_nvswitch_node():
    inv, _ = probe_fixture("h100-sxm-8x")
    f = facts.node_facts(inv)
    assert f.gpu_count == 8
    assert f.model_counts == {"H100-SXM5-80GB": 8}
    assert f.numa_nodes == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    assert f.gpus_per_numa == {0: 4, 1: 4}
    assert f.max_gpus_per_numa == 4
    assert f.interconnect == "nvlink" and f.all_pairs_nvlink is True
    assert all(cell == "NV18" for i, row in enumerate(inv.topology.matrix) for j, cell in enumerate(row) if i != j)
    assert f.mig_capable == {i: True for i in range(8)}
    assert f.mig_enabled == {i: False for i in range(8)}
    assert f.mig_layouts == {i: None for i in range(8)}
    g = inv.gpu(0)
    assert (g.name, g.product) == ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3")
    assert (g.pci.device_id, g.pci.vendor_id, g.pci.bus_id) == ("0x2330", "0x10DE", "00000000:1B:00.0")
    assert (g.memory_mib, g.architecture, g.compute_capability) == (81559, "hopper", "9.0")
    assert g.persistence_mode is True and g.ecc.current is True
    assert g.cpu_affinity == "0-55,112-167" and inv.gpu(7).cpu_affinity == "56-111,168-223"
    # 18 links in 4 NVSwitch groups (5+4+4+5)
    assert [len(l.links) for l in g.nvlinks] == [5, 4, 4, 5]
    assert {l.remote_type for l in g.nvlinks} == {"switch"} and all(l.remote_gpu is None for l in g.nvlinks)
    # MIG off: profiles known, placements not reported, no instances
    assert [p.name for p in g.mig.profiles] == [
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]
    assert all(p.placements is None for p in g.mig.profiles) and g.mig.instances is None
    assert inv.system.driver_version == "550.90.07" and inv.system.cuda_driver_version == "12.4"
    assert not f.incomplete


def test_a100_pcie_two_sockets_pcie_only():
    inv, _ = probe_fixture("a100-pcie-4x")
    f = facts.node_facts(inv)
    assert f.gpu_count == 4 and f.model_counts == {"A100-PCIE-80GB": 4}
    assert inv.topology.matrix == [
        ["X", "PIX", "SYS", "SYS"],
        ["PIX", "X", "SYS", "SYS"],
        ["SYS", "SYS", "X", "PXB"],
        ["SYS", "SYS", "PXB", "X"],
    ]
    assert f.interconnect == "pcie" and f.all_pairs_nvlink is False
    assert f.gpus_per_numa == {0: 2, 1: 2} and f.max_gpus_per_numa == 2
    g = inv.gpu(2)
    assert g.pci.device_id == "0x20B5" and g.product == "NVIDIA-A100-80GB-PCIe" and g.memory_mib == 81920
    # NVLink hardware without bridges: 12 links, all inactive
    assert [(l.links, l.active) for l in g.nvlinks] == [(list(range(12)), False)]
    assert facts.pair_levels(inv)[(0, 1)] == "PIX"


def test_a100_mig_instances_and_placements():
    inv, _ = probe_fixture("a100-mig")
    f = facts.node_facts(inv)
    assert f.mig_enabled == {0: True, 1: True, 2: True, 3: False}
    assert f.mig_layouts == {
        0: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        1: {"1g.10gb": 7},
        2: {},
        3: None,
    }
    assert facts.mig_placements(inv.gpu(0)) == [
        ("2g.20gb", 0, 2), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 4),
    ]
    assert [i.id for i in inv.gpu(0).mig.instances] == [5, 13, 14, 1]
    g3 = inv.gpu(3)
    assert (g3.mig.current, g3.mig.pending) == (False, True)
    assert g3.mig.instances is None and all(p.placements is None for p in g3.mig.profiles)
    placements = {p.name: [(x.start, x.size) for x in p.placements] for p in inv.gpu(0).mig.profiles}
    assert placements["1g.10gb"] == [(s, 1) for s in range(7)]
    assert placements["1g.20gb"] == [(0, 2), (2, 2), (4, 2), (6, 2)]
    assert placements["3g.40gb"] == [(0, 4), (4, 4)]
    assert placements["7g.80gb"] == [(0, 8)]
    assert {p.name: p.id for p in inv.gpu(0).mig.profiles}["3g.40gb"] == 9
    # direct NVLink, 4 links to each peer
    assert f.interconnect == "nvlink"
    assert inv.topology.matrix[0] == ["X", "NV4", "NV4", "NV4"]
    assert [(l.remote_gpu, l.links) for l in inv.gpu(0).nvlinks] == [(1, [0, 1, 2, 3]), (2, [4, 5, 6, 7]), (3, [8, 9, 10, 11])]
    assert f.gpus_per_numa == {0: 4}


def test_t4_old_driver_no_mig_no_nvlink_numa_fallback():
    inv, fake = probe_fixture("t4")
    f = facts.node_facts(inv)
    g = inv.gpu(0)
    assert f.gpu_count == 1 and f.model_counts == {"T4": 1}
    assert g.mig.capable is False and f.mig_capable == {0: False}
    assert g.nvlinks == [] and f.interconnect == "single" and f.all_pairs_nvlink is None
    # nvmlDeviceGetNumaNodeId is missing on R470: the memory-affinity mask answers
    assert g.numa_node == 0 and fake.calls["nvmlDeviceGetMemoryAffinity"] == 1
    assert g.errors == [] and not f.incomplete
    assert (g.compute_capability, g.architecture, g.memory_mib, g.product) == ("7.5", "turing", 15360, "Tesla-T4")
    assert inv.system.cuda_driver_version == "11.4" and inv.system.driver_version == "470.239.06"
    assert g.persistence_mode is False


def test_no_gpus():
    inv, _ = probe_fixture("no-gpus")
    assert inv.gpus == [] and inv.topology.matrix == []
    f = facts.node_facts(inv)
    assert f.gpu_count == 0 and f.max_gpus_per_numa == 0 and f.interconnect == "single"
