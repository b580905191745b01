from __future__ import annotations

from gpuplan.probe.collect import bus_key, cpulist, cuda_version, gfd_product, mask_bits, text


def test_cpulist_and_masks():
    assert cpulist([]) == ""
    assert cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert mask_bits([0b1011, 1]) == [0, 1, 3, 64]
    assert cpulist(mask_bits([(1 << 56) - 1, 0xFFFFFFFFFFFF << 48, (1 << 40) - 1])) == "0-55,112-167"


def test_versions_and_names():
    assert cuda_version(12040) == "12.4"
    assert cuda_version(11080) == "11.8"
    assert cuda_version(13000) == "13.0"
    assert gfd_product("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert gfd_product("Tesla T4") == "Tesla-T4"
    assert text(b"abc") == "abc" and text("abc") == "abc"


def test_bus_ids_compare_across_formats():
    assert bus_key("00000000:1B:00.0") == bus_key("0000:1b:00.0")
    assert bus_key("00000000:1B:00.0") != bus_key("00000000:1C:00.0")
