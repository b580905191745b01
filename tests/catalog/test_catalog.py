"""The GPU catalog: generated data, name resolution, resource names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.catalog import (
    all_gpus,
    get_gpu,
    gets_mixed_resource,
    gfd_product_name,
    karpenter_gpu_name,
    mig_gpus,
    mig_resource_name,
    parse_profile_name,
    resolve_gpu,
    suggest_gpus,
)
from gpuplan.catalog import build_catalog

REPO = Path(__file__).resolve().parents[2]
JSON_PATH = REPO / "gpuplan" / "catalog" / "gpus.json"

MODELS = all_gpus()
IDS = [g.key for g in MODELS]


def test_committed_json_is_in_the_scripts_canonical_form():
    """gpus.json is written by `python -m gpuplan.upstream.refresh` (which runs
    build_catalog on the reference and records its sha256); here, without the
    reference, the file must at least be exactly what the script renders."""
    committed = JSON_PATH.read_text(encoding="utf-8")
    data = json.loads(committed)
    assert build_catalog.render(data) == committed
    assert len(data["reference"]["sha256"]) == 64 and data["sources"]


def test_every_reference_gpu_and_profile_is_in_the_catalog():
    data = json.loads(JSON_PATH.read_text(encoding="utf-8"))
    # the reference tables as gpus.json carries them, read back through the catalog API
    tables = [
        {"model": t["reference_model"], "pci_device_ids": [{"id": p} for g in data["gpus"] if g["table"] == k
                                                            for p in g["pci_ids"]],
         "profiles": [{**p, "nvidia_smi_profile_id": p["smi_id"],
                       "placements": [{"start": s, "size": z} for s, z in p["placements"]]} for p in t["profiles"]]}
        for k, t in data["tables"].items()
    ]
    assert len(tables) == 14
    for t in tables:
        for pci in t["pci_device_ids"]:
            g = resolve_gpu(pci["id"])
            assert g is not None and g.mig_capable, pci
            for rp in t["profiles"]:
                p = g.profile(rp["name"])
                assert p is not None, (g.key, rp["name"])
                assert p.smi_id == rp["nvidia_smi_profile_id"]
                assert p.compute_slices == rp["compute_slices"]
                assert p.memory_slices == rp["memory_slices"]
                assert p.max_instances == rp["max_instances"]
                assert p.placements == tuple((x["start"], x["size"]) for x in rp["placements"])
            assert len(g.profiles) == len(t["profiles"])


def test_brief_models_are_present():
    for name in ["A100-SXM4-40GB", "A100-PCIE-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB", "A30",
                 "H100-SXM5-80GB", "H100-PCIE-80GB", "H100-NVL-94GB", "GH200-96GB", "H20", "H200-SXM-141GB",
                 "H200-NVL-141GB", "GH200-144GB", "B200", "GB200", "B300", "GB300",
                 "RTX-PRO-6000-BLACKWELL-SERVER", "RTX-PRO-5000-BLACKWELL"]:
        assert get_gpu(name).mig_capable, name
    for name in ["T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "A10", "A10G", "A40", "L4", "L40", "L40S"]:
        g = get_gpu(name)
        assert not g.mig_capable and g.profiles == () and g.compute_slices == 0, name


@pytest.mark.parametrize("key", IDS)
def test_resolve_every_spelling(key):
    g = get_gpu(key)
    spellings = [g.key, g.key.lower(), *g.aliases, *g.smi_names, *g.gfd_names]
    for pci in g.pci_ids:
        dev = pci[2:]
        spellings += [pci, pci.lower(), pci.upper().replace("0X", "0x"), f"0x{dev}10DE", f"0x{dev.lower()}10de",
                      f"10de:{dev.lower()}"]
    spellings += [s.upper() for s in spellings] + [f"  {g.smi_name}  "]
    for s in spellings:
        assert resolve_gpu(s) is g, s
    assert g.gfd_product == g.smi_name.replace(" ", "-")
    assert all(f.endswith("10DE") and len(f) == 10 for f in g.device_filters)


def test_names_are_unique_across_models():
    seen: dict[str, str] = {}
    for g in MODELS:
        for n in {x.lower() for x in (g.key, *g.aliases, *g.smi_names, *g.gfd_names, *g.pci_ids)}:
            assert seen.setdefault(n, g.key) == g.key, f"{n} names {seen[n]} and {g.key}"


@pytest.mark.parametrize(
    "text,key",
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("A100-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("H100-SXM5-80GB", "H100-SXM5-80GB"),
        ("h100-80gb", "H100-SXM5-80GB"),
        ("H200", "H200-SXM-141GB"),
        ("T4", "T4"),
        ("Tesla T4", "T4"),
        ("0x20B2", "A100-SXM4-80GB"),
        ("0x20B210DE", "A100-SXM4-80GB"),
        ("0x20b510de", "A100-PCIE-80GB"),
        ("0x233B10DE", "H200-NVL-141GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-SXM4-40GB"),  # GFD single-strategy label
        ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "A100-SXM4-40GB"),
        ("Tesla-T4-SHARED", "T4"),
    ],
)
def test_resolve_examples(text, key):
    assert resolve_gpu(text) is get_gpu(key)


@pytest.mark.parametrize("text", ["", "A100", "H300", "0x1234", "NVIDIA-A100", "0x20B2FFFF"])
def test_resolve_rejects(text):
    assert resolve_gpu(text) is None


def test_suggest_gpus():
    assert suggest_gpus("A100")[:4] == ["A100-SXM4-40GB", "A100-PCIE-40GB", "A100-SXM4-80GB", "A100-PCIE-80GB"]
    assert "H100-SXM5-80GB" in suggest_gpus("H10O-80GB")
    assert "L40S" in suggest_gpus("L40SS")
    assert suggest_gpus("") == []


def test_gfd_and_karpenter_helpers():
    assert gfd_product_name("A100-SXM4-40GB") == "NVIDIA-A100-SXM4-40GB"
    assert gfd_product_name("A100-SXM4-40GB", mig_profile="1g.5gb") == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert gfd_product_name("T4", shared=True) == "Tesla-T4-SHARED"
    expected = {"A100-SXM4-40GB": "a100", "A100-SXM4-80GB": "a100", "H100-SXM5-80GB": "h100",
                "H200-SXM-141GB": "h200", "B200": "b200", "B300": "b300", "T4": "t4", "A10G": "a10g",
                "L4": "l4", "L40S": "l40s", "V100-SXM2-16GB": "v100", "V100-SXM2-32GB": "v100"}
    for key, name in expected.items():
        assert karpenter_gpu_name(key) == name
    assert karpenter_gpu_name("A30") is None
    with pytest.raises(KeyError):
        gfd_product_name("nope")


def test_model_facts():
    a100 = get_gpu("A100-SXM4-40GB")
    assert (a100.compute_slices, a100.memory_slices, a100.max_instances) == (7, 8, 7)
    assert a100.memory_mib == 40960 and a100.compute_capability == "8.0" and a100.architecture == "Ampere"
    assert get_gpu("A30").compute_slices == 4 and get_gpu("RTX-PRO-5000-BLACKWELL").memory_slices == 2
    assert get_gpu("L40S").compute_capability == "8.9" and get_gpu("T4").compute_capability == "7.5"
    # boards sharing a profile table share the very same profile objects
    assert get_gpu("A100-PCIE-80GB").profiles is get_gpu("A100-SXM4-80GB").profiles
    p = a100.profile("3g.20gb")
    assert p is not None and p.lgipp == "{0,4}:4" and p.smi_id == 9 and p.nvml_index.endswith("3_SLICE")
    assert a100.profile("3G.20GB") is p  # case-insensitive
    assert a100.profile("3g.40gb") is None
    # driver facts (rules.md §3)
    assert a100.profile("1g.5gb+me").min_driver == 470 and a100.profile("1g.10gb").min_driver == 525
    assert get_gpu("A30").profile("2g.12gb+me").min_driver == 525
    assert get_gpu("A100-SXM4-80GB").combo_min_driver[0][:2] == (("4g.40gb", "3g.40gb"), 510)
    # provenance is kept
    assert "placements" in get_gpu("B200").profile("3g.90gb").inferred
    assert get_gpu("H100-SXM5-80GB").profile("3g.40gb").inferred == ()
    assert dict(get_gpu("H100-SXM5-80GB").sources)["placements"]


def test_same_name_means_different_geometry_per_model():
    # rules.md §5: 1g.35gb is a double-memory 1g on H200 and a single 1g on GB300
    assert get_gpu("H200-SXM-141GB").profile("1g.35gb").memory_slices == 2
    assert get_gpu("GB300").profile("1g.35gb").memory_slices == 1
    # and ID 5 is 4g on A100 but 2g on A30
    assert get_gpu("A100-SXM4-40GB").profile("4g.20gb").smi_id == 5
    assert get_gpu("A30").profile("2g.12gb").smi_id == 5


@pytest.mark.parametrize(
    "profile,strategy,expected",
    [
        ("1g.10gb", "mixed", "nvidia.com/mig-1g.10gb"),
        ("1g.10gb+me", "mixed", "nvidia.com/mig-1g.10gb.me"),
        ("1g.24gb+me.all", "mixed", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb+gfx", "mixed", "nvidia.com/mig-1g.24gb.gfx"),
        ("1g.24gb-me", "mixed", "nvidia.com/mig-1g.24gb-me"),
        ("3g.40gb", "single", "nvidia.com/gpu"),
        ("1c.3g.40gb", "mixed", None),
        ("3c.3g.40gb", "mixed", "nvidia.com/mig-3g.40gb"),
        ("3g.40gb", "none", None),
    ],
)
def test_mig_resource_name(profile, strategy, expected):
    assert mig_resource_name(profile, strategy) == expected


def test_mixed_resource_and_profile_names():
    assert gets_mixed_resource("2g.20gb") and not gets_mixed_resource("1c.2g.20gb")
    assert not gets_mixed_resource("not-a-profile")
    assert parse_profile_name("1c.2g.20gb").gi_name == "2g.20gb"
    assert parse_profile_name("1g.10gb+me").attributes == "+me"
    assert parse_profile_name("1g.10") is None
    with pytest.raises(ValueError):
        mig_resource_name("1g.10gb", "weird")


def test_mig_gpus_are_the_capable_ones():
    assert {g.key for g in mig_gpus()} == {g.key for g in MODELS if g.mig_capable}
    assert all(g.profiles for g in mig_gpus())


def test_catalog_import_is_stdlib_only():
    code = (
        "import sys, gpuplan.catalog as c; c.all_gpus(); c.resolve_gpu('T4');"
        "bad=[m for m in ('ruamel','ruamel.yaml','yaml','pydantic','highspy','scipy','click') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
