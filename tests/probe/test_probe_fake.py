"""The fake behaves like pynvml where the probe depends on it, and the probe
handles what real NVML does: errors per field, read-only access."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pynvml
import pytest

from probe_support import GPU_FIXTURES, fixture_path, probe_fixture, run_probe
from gpuplan.probe import _nvml_compat as compat
from gpuplan.probe.collect import NvmlUnavailable, mig_memory_gb, profile_name
from gpuplan.probe.fake import MUTATING, FakeMutationError, FakeNvml, load_fake

READ_ONLY = re.compile(r"^nvml(Init|InitWithFlags|Shutdown|SystemGet\w+|DeviceGet\w+|GpuInstanceGet\w+)$")


# --- read-only -----------------------------------------------------------------


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_probe_calls_only_read_functions(name):
    _, fake = probe_fixture(name)
    assert fake.mutations == []
    called = fake.read_functions_called
    assert called, "the probe made no NVML call"
    assert [f for f in called if not READ_ONLY.match(f) or MUTATING.search(f)] == []


def test_mutating_functions_raise_and_are_recorded():
    fake = load_fake(fixture_path("a100-mig"))
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    for fn in ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlGpuInstanceDestroy",
               "nvmlDeviceResetGpuLockedClocks", "nvmlDeviceSetPersistenceMode", "nvmlDeviceClearCpuAffinity"):
        with pytest.raises(FakeMutationError):
            getattr(fake, fn)(h, 1)
    assert len(fake.mutations) == 6


def test_a_mutating_call_inside_the_probe_is_not_swallowed(monkeypatch):
    """If the probe ever called a mutating function, the fake's error would
    surface (it is not an NVMLError the probe records)."""
    from gpuplan.probe import collect

    real = collect._read_gpu

    def bad(n, g):
        real(n, g)
        n.m.nvmlDeviceSetPersistenceMode(g.handle, 1)

    monkeypatch.setattr(collect, "_read_gpu", bad)
    fake = load_fake(fixture_path("t4"))
    with pytest.raises(FakeMutationError):
        run_probe(fake)
    assert fake.mutations == ["nvmlDeviceSetPersistenceMode"]


def test_probe_source_names_no_mutating_function():
    src = (Path(__file__).parents[2] / "gpuplan" / "probe" / "collect.py").read_text()
    names = set(re.findall(r'"(nvml\w+)"', src))
    assert "nvmlDeviceGetMigMode" in names
    assert sorted(n for n in names if MUTATING.search(n)) == []


# --- fidelity --------------------------------------------------------------------


def test_errors_are_pynvmls_own_classes():
    fake = load_fake(fixture_path("t4"))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as e:
        fake.nvmlDeviceGetMigMode(h)
    assert e.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED == 3
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        fake.nvmlDeviceGetNumaNodeId(h)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetNvLinkState(h, 0)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetName("not a handle")
    fake.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetName(h)


def test_init_failure_modes():
    fake = FakeNvml({"system": {"init": "LIBRARY_NOT_FOUND"}})
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        fake.nvmlInit()
    with pytest.raises(NvmlUnavailable, match=r"libnvidia-ml\.so\.1\) not found"):
        run_probe(fake)
    with pytest.raises(NvmlUnavailable, match="kernel driver is not loaded"):
        run_probe(load_fake(fixture_path("no-driver")))


def test_compat_matches_pynvml():
    for name, code in compat.ERROR_CODES.items():
        assert getattr(pynvml, name) == code, name
    for name, value in compat.CONSTANTS.items():
        if name != "NVML_NVLINK_MAX_LINKS":  # grows with each release
            assert getattr(pynvml, name) == value, name
    assert compat.NVMLError is pynvml.NVMLError
    assert compat.error_class(3) is pynvml.NVMLError_NotSupported


def test_placements_follow_the_null_then_fill_protocol():
    fake = load_fake(fixture_path("a100-mig"))
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    count = ctypes.c_uint(0)
    fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 19, None, ctypes.byref(count))
    assert count.value == 7
    small = (pynvml.c_nvmlGpuInstancePlacement_t * 2)()
    with pytest.raises(pynvml.NVMLError_InsufficientSize):
        fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 19, small, ctypes.byref(count))
    # MIG off on GPU 3: NVML does not report placements
    h3 = fake.nvmlDeviceGetHandleByIndex(3)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetGpuInstancePossiblePlacements(h3, 19, None, ctypes.byref(count))
    with pytest.raises(pynvml.NVMLError_NotSupported):  # profile this GPU lacks
        fake.nvmlDeviceGetGpuInstanceProfileInfo(h, 0x5)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):  # past the driver's table
        fake.nvmlDeviceGetGpuInstanceProfileInfo(h, 0x40)


# --- per-field errors -------------------------------------------------------------


def test_refused_queries_are_recorded_per_field():
    inv, fake = probe_fixture("t4-refusing")
    assert [(e.field, e.nvml_error, e.code) for e in inv.gpu(2).errors] == [
        ("ecc", "NVML_ERROR_CORRUPTED_INFOROM", 14)
    ]
    assert inv.gpu(2).ecc is None and inv.gpu(2).memory_mib == 15360
    assert [(e.field, e.nvml_error) for e in inv.gpu(3).errors] == [("cpuAffinity", "NVML_ERROR_NO_PERMISSION")]
    assert inv.gpu(3).cpu_affinity is None and inv.gpu(3).ecc.current is True
    assert inv.gpu(0).errors == [] and inv.gpu(1).errors == []


def _one_gpu(**over):
    gpu = {
        "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-x", "memoryMiB": 81920, "architecture": 7,
        "computeCapability": [8, 0], "ecc": [1, 1], "numaNode": 0, "cpuAffinity": "0-7",
        "pci": {"busId": "00000000:01:00.0", "deviceId": 0x20B2},
    }
    gpu.update(over)
    return {"system": {"driverVersion": "550.90.07", "cudaDriverVersion": 12040, "nvmlVersion": "12.550.90.07"},
            "gpus": [gpu]}


def test_lost_gpu_is_reported_once_not_per_query():
    inv = run_probe(FakeNvml(_one_gpu(lost=True)))
    assert [(e.field, e.nvml_error) for e in inv.gpu(0).errors] == [("name", "NVML_ERROR_GPU_IS_LOST")]
    assert inv.gpu(0).uuid is None


def test_handle_refused_gives_an_index_only_entry():
    data = _one_gpu(fail={"nvmlDeviceGetHandleByIndex": "NO_PERMISSION"})
    data["gpus"].append({**data["gpus"][0], "fail": {}, "pci": {"busId": "00000000:02:00.0", "deviceId": 0x20B2},
                         "uuid": "GPU-y"})
    inv = run_probe(FakeNvml(data))
    assert inv.gpu(0).errors[0].field == "handle" and inv.gpu(0).name is None
    assert inv.gpu(1).name == "NVIDIA A100-SXM4-80GB"
    assert inv.topology.matrix == [["X", "UNKNOWN"], ["UNKNOWN", "X"]]


def test_numa_unknown_is_an_error_when_no_fallback_answers():
    data = _one_gpu()
    data["system"]["missingFunctions"] = ["nvmlDeviceGetNumaNodeId", "nvmlDeviceGetMemoryAffinity"]
    inv = run_probe(FakeNvml(data))
    assert inv.gpu(0).numa_node is None
    assert [(e.field, e.nvml_error) for e in inv.gpu(0).errors] == [("numaNode", "NVML_ERROR_FUNCTION_NOT_FOUND")]


def test_mig_names_are_derived_without_the_v2_profile_call():
    """Drivers without nvmlDeviceGetGpuInstanceProfileInfoV give no names:
    the probe derives them the way go-nvlib does, and gets the same ones."""
    fake = load_fake(fixture_path("a100-mig"))
    fake.missing.add("nvmlDeviceGetGpuInstanceProfileInfoV")
    inv = run_probe(fake)
    ref, _ = probe_fixture("a100-mig")
    assert [p.name for p in inv.gpu(0).mig.profiles] == [p.name for p in ref.gpu(0).mig.profiles]
    assert inv.gpu(0).errors == []
    h100 = load_fake(fixture_path("h100-sxm-8x"))
    h100.missing.add("nvmlDeviceGetGpuInstanceProfileInfoV")
    assert [p.name for p in run_probe(h100).gpu(0).mig.profiles] == [
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]


def test_profile_name_helpers():
    assert profile_name(0, "MIG 1g.10gb", 1, 9728, 81920 << 20) == "1g.10gb"
    assert profile_name(0x7, "", 1, 9728, 81920 << 20) == "1g.10gb+me"
    assert profile_name(0x9, "", 1, 19968, 81920 << 20) == "1g.20gb"
    assert mig_memory_gb(9856, 81559 << 20) == 10
    assert mig_memory_gb(40192, 40960 << 20) == 40  # A100-40GB 7g.40gb-ish share
