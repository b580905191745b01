"""GP710-GP715: the spec against the node inventory."""

from __future__ import annotations

from tests.rules.helpers import BASE, edit, only, position

from gpuplan.probe.inventory import (
    GpuInfo, Metadata, MigInfo, MigInstance, MigProfile, NodeInventory, PciInfo, Placement, Probe, SystemInfo,
    dump_yaml,
)

A100_SXM = ("NVIDIA A100-SXM4-80GB", "0x20B2")
A100_PCIE = ("NVIDIA A100 80GB PCIe", "0x20B5")
T4 = ("Tesla T4", "0x1EB8")
ONE_G = MigProfile(id=19, name="1g.10gb", slice_count=1, instance_count=7, memory_size_mib=9728,
                   multiprocessor_count=14)
THREE_G = MigProfile(id=9, name="3g.40gb", slice_count=3, instance_count=2, memory_size_mib=40192,
                     multiprocessor_count=42)


def gpu(i: int, model=A100_SXM, *, mig: bool | None = None, layout: dict[str, int] | None = None,
        capable: bool = True) -> GpuInfo:
    info = None
    if capable:
        instances = None
        if mig and layout is not None:
            instances, start = [], 0
            for name, n in layout.items():
                size = 4 if name.startswith("3g") else 1
                for _ in range(n):
                    instances.append(MigInstance(id=len(instances) + 1, profile_id=9 if size == 4 else 19,
                                                 profile=name, placement=Placement(start=start, size=size)))
                    start += size
        info = MigInfo(capable=True, current=bool(mig), pending=bool(mig), profiles=[ONE_G, THREE_G],
                       instances=instances)
    else:
        info = MigInfo(capable=False)
    return GpuInfo(index=i, name=model[0], pci=PciInfo(bus_id=f"00000000:{i + 1:02X}:00.0", device_id=model[1],
                                                        vendor_id="0x10DE"), mig=info)


def node(name: str, gpus: list[GpuInfo]) -> str:
    inv = NodeInventory(metadata=Metadata(name=name), probe=Probe(version="0.1.0", source="fake"),
                        system=SystemInfo(hostname=name), gpus=gpus)
    return dump_yaml(inv)


def write_fleet(tmp_path, nodes: dict[str, list[GpuInfo]], text: str = BASE) -> str:
    inv = tmp_path / "inventory"
    inv.mkdir(exist_ok=True)
    for name, gpus in nodes.items():
        (inv / f"{name}.yaml").write_text(node(name, gpus), encoding="utf-8")
    return edit(text, "  pools:\n", "  inventory: [inventory/*.yaml]\n  pools:\n")


def matching(**over) -> dict[str, list[GpuInfo]]:
    nodes = {
        "n1": [gpu(i) for i in range(4)],
        "n2": [gpu(i) for i in range(4)],
        "n3": [gpu(i, mig=True, layout={"1g.10gb": 7}) for i in range(4)],
        "n4": [gpu(i) for i in range(4)],
    }
    nodes.update(over)
    return nodes


def test_matching_inventory_is_clean(run, tmp_path):
    text = write_fleet(tmp_path, matching())
    assert run(text) == []


def test_gp710_node_without_inventory(run, tmp_path):
    nodes = matching()
    del nodes["n2"]
    text = write_fleet(tmp_path, nodes)
    d = only(run(text), "GP710")
    assert (d.line, d.col) == position(text, "n2]")
    assert d.severity.value == "warning"


def test_gp711_wrong_model_and_count(run, tmp_path):
    text = write_fleet(tmp_path, matching(n2=[gpu(0, A100_PCIE), gpu(1, A100_PCIE)]))
    d = only(run(text), "GP711")
    assert d.message == ("node n2: inventory has 2× NVIDIA A100 80GB PCIe, pool train expects "
                         "4× A100-SXM4-80GB")
    assert (d.line, d.col) == position(text, "n2]")


def test_gp712_mig_pool_on_gpus_without_mig(run, tmp_path):
    text = write_fleet(tmp_path, matching(n3=[gpu(i, capable=False) for i in range(4)]))
    d = only(run(text), "GP712")
    assert "GPU 0 reports no MIG capability" in d.message
    assert (d.line, d.col) == position(text, "n3]")


def test_gp712_profile_not_offered_by_the_gpu(run, tmp_path):
    spec = edit(BASE, "layout: {1g.10gb: 7}", "layout: {2g.20gb: 3}")
    spec = edit(spec, "profile: 1g.10gb", "profile: 2g.20gb")
    text = write_fleet(tmp_path, matching(), spec)
    d = only(run(text), "GP712")
    assert "does not offer 2g.20gb" in d.message


def test_gp713_unknown_gpu(run, tmp_path):
    text = write_fleet(tmp_path, matching(n1=[gpu(i, ("NVIDIA Prototype X", "0x9999")) for i in range(4)]))
    d = only(run(text), "GP713")
    assert "PCI device 0x9999" in d.message
    assert (d.line, d.col) == position(text, "n1,")


def test_gp714_mig_drift_is_reported_as_a_drain(run, tmp_path):
    nodes = matching(n3=[gpu(0, mig=True, layout={"3g.40gb": 2})] + [gpu(i, mig=True, layout={"1g.10gb": 7})
                                                                   for i in range(1, 4)])
    text = write_fleet(tmp_path, nodes)
    d = only(run(text), "GP714")
    assert d.message == ("node n3: MIG state differs from pool infer (GPU 0 now {3g.40gb: 2}, wanted "
                         "{1g.10gb: 7}): will be reconfigured (node drained)")
    assert d.severity.value == "info"
    # MIG still off on a MIG pool is a change too
    text = write_fleet(tmp_path, matching(n3=[gpu(i) for i in range(4)]))
    assert "(GPUs 0, 1, 2, 3 now MIG disabled, wanted {1g.10gb: 7})" in only(run(text), "GP714").message
    # each GPU's own state is named, not only the first one's
    text = write_fleet(tmp_path, matching(n3=[gpu(0, mig=True, layout={"1g.10gb": 7}), gpu(1, mig=True, layout={}),
                                        gpu(2), gpu(3, mig=True, layout={"3g.40gb": 2})]))
    assert only(run(text), "GP714").message == (
        "node n3: MIG state differs from pool infer (GPU 1 now MIG on with no instances, wanted {1g.10gb: 7}; "
        "GPU 2 now MIG disabled, wanted {1g.10gb: 7}; GPU 3 now {3g.40gb: 2}, wanted {1g.10gb: 7}): "
        "will be reconfigured (node drained)")


def test_gp715_inventory_node_in_no_pool(run, tmp_path):
    text = write_fleet(tmp_path, matching(spare=[gpu(0, T4, capable=False)]))
    d = only(run(text), "GP715")
    assert d.message == "inventory node spare (1× Tesla T4) is in no pool"
    assert (d.line, d.col) == position(text, "inventory:")
