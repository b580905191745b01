"""The parts of ``pynvml`` that the probe and the fake share: error classes,
constants and ctypes structures.

When ``pynvml`` (the ``nvidia-ml-py`` package) is importable, everything here
*is* pynvml's own object, so ``except pynvml.NVMLError_NotSupported`` matches
an error raised by the fake exactly as it matches one raised by real NVML.
Without pynvml (the package's ``probe`` extra not installed) the same names are
defined here with the same values, layouts and class hierarchy, so the fake and
the tests still work. ``tests/probe/test_fake.py`` checks the two agree.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import string
from ctypes import POINTER, Structure, c_char, c_uint, c_ulonglong

try:  # pragma: no branch - which side runs depends on the environment
    import pynvml as _pynvml
except ImportError:  # pragma: no cover - exercised only without nvidia-ml-py
    _pynvml = None

# Names this module provides, whichever side defines them.
ERROR_CODES: dict[str, int] = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_INVALID_ARGUMENT": 2,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_ALREADY_INITIALIZED": 5,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_INSUFFICIENT_SIZE": 7,
    "NVML_ERROR_INSUFFICIENT_POWER": 8,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_TIMEOUT": 10,
    "NVML_ERROR_IRQ_ISSUE": 11,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_CORRUPTED_INFOROM": 14,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_RESET_REQUIRED": 16,
    "NVML_ERROR_OPERATING_SYSTEM": 17,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_IN_USE": 19,
    "NVML_ERROR_MEMORY": 20,
    "NVML_ERROR_NO_DATA": 21,
    "NVML_ERROR_INSUFFICIENT_RESOURCES": 23,
    "NVML_ERROR_UNKNOWN": 999,
}

CONSTANTS: dict[str, int] = {
    "NVML_SUCCESS": 0,
    "NVML_FEATURE_DISABLED": 0,
    "NVML_FEATURE_ENABLED": 1,
    "NVML_DEVICE_MIG_DISABLE": 0,
    "NVML_DEVICE_MIG_ENABLE": 1,
    "NVML_NVLINK_MAX_LINKS": 18,
    "NVML_NVLINK_DEVICE_TYPE_GPU": 0x00,
    "NVML_NVLINK_DEVICE_TYPE_IBMNPU": 0x01,
    "NVML_NVLINK_DEVICE_TYPE_SWITCH": 0x02,
    "NVML_NVLINK_DEVICE_TYPE_UNKNOWN": 0xFF,
    "NVML_TOPOLOGY_INTERNAL": 0,
    "NVML_TOPOLOGY_SINGLE": 10,
    "NVML_TOPOLOGY_MULTIPLE": 20,
    "NVML_TOPOLOGY_HOSTBRIDGE": 30,
    "NVML_TOPOLOGY_NODE": 40,
    "NVML_TOPOLOGY_SYSTEM": 50,
    "NVML_AFFINITY_SCOPE_NODE": 0,
    "NVML_AFFINITY_SCOPE_SOCKET": 1,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE": 0x0,
    "NVML_GPU_INSTANCE_PROFILE_2_SLICE": 0x1,
    "NVML_GPU_INSTANCE_PROFILE_3_SLICE": 0x2,
    "NVML_GPU_INSTANCE_PROFILE_4_SLICE": 0x3,
    "NVML_GPU_INSTANCE_PROFILE_7_SLICE": 0x4,
    "NVML_GPU_INSTANCE_PROFILE_8_SLICE": 0x5,
    "NVML_GPU_INSTANCE_PROFILE_6_SLICE": 0x6,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1": 0x7,
    "NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1": 0x8,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2": 0x9,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX": 0xA,
    "NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX": 0xB,
    "NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX": 0xC,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME": 0xD,
    "NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME": 0xE,
    "NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME": 0xF,
    "NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME": 0x10,
    "NVML_GPU_INSTANCE_PROFILE_COUNT": 0x12,
}

STRUCTS = (
    "nvmlPciInfo_t",
    "c_nvmlMemory_t",
    "c_nvmlGpuInstancePlacement_t",
    "c_nvmlGpuInstanceProfileInfo_t",
    "c_nvmlGpuInstanceProfileInfo_v2_t",
    "c_nvmlGpuInstanceInfo_t",
    "c_nvmlGpuInstance_t",
    "c_nvmlDevice_t",
)


def _class_name(err_name: str) -> str:
    # the rule pynvml uses: NVML_ERROR_NOT_SUPPORTED -> NVMLError_NotSupported
    return "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")


if _pynvml is not None:
    NVMLError = _pynvml.NVMLError
    SOURCE = "pynvml"
    _ns = {n: getattr(_pynvml, n) for n in (*ERROR_CODES, *CONSTANTS, *STRUCTS) if hasattr(_pynvml, n)}
    for _n in ERROR_CODES:
        _cls = _class_name(_n)
        if hasattr(_pynvml, _cls):
            _ns[_cls] = getattr(_pynvml, _cls)
    # NVML_NVLINK_MAX_LINKS grew from 6 to 36 over releases; keep pynvml's
    globals().update(_ns)
else:  # pragma: no cover - exercised only without nvidia-ml-py
    SOURCE = "gpuplan"

    class NVMLError(Exception):  # type: ignore[no-redef]
        """Same contract as pynvml.NVMLError: ``NVMLError(code)`` returns the
        subclass for that code and carries it in ``.value``."""

        _valClassMapping: dict[int, type] = {}

        def __new__(typ, value):
            if typ is NVMLError:
                typ = NVMLError._valClassMapping.get(value, typ)
            obj = Exception.__new__(typ)
            obj.value = value
            return obj

        def __str__(self) -> str:
            for name, code in ERROR_CODES.items():
                if code == self.value:
                    return name.replace("NVML_ERROR_", "").replace("_", " ").title()
            return "NVML Error with code %d" % self.value

        def __eq__(self, other):
            return self.value == other.value

        __hash__ = Exception.__hash__

    def _gen_new(val):
        def new(typ, *args):
            return NVMLError.__new__(typ, val)

        return new

    for _n, _v in ERROR_CODES.items():
        _cls = type(_class_name(_n), (NVMLError,), {"__new__": _gen_new(_v)})
        _cls.__module__ = __name__
        globals()[_cls.__name__] = _cls
        NVMLError._valClassMapping[_v] = _cls
    globals().update(ERROR_CODES)
    globals().update(CONSTANTS)

    class nvmlPciInfo_t(Structure):
        _fields_ = [
            ("busIdLegacy", c_char * 16),
            ("domain", c_uint),
            ("bus", c_uint),
            ("device", c_uint),
            ("pciDeviceId", c_uint),
            ("pciSubSystemId", c_uint),
            ("busId", c_char * 32),
        ]

    class c_nvmlMemory_t(Structure):
        _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]

    class c_nvmlGpuInstancePlacement_t(Structure):
        _fields_ = [("start", c_uint), ("size", c_uint)]

    _PROFILE_FIELDS = [
        ("id", c_uint),
        ("isP2pSupported", c_uint),
        ("sliceCount", c_uint),
        ("instanceCount", c_uint),
        ("multiprocessorCount", c_uint),
        ("copyEngineCount", c_uint),
        ("decoderCount", c_uint),
        ("encoderCount", c_uint),
        ("jpegCount", c_uint),
        ("ofaCount", c_uint),
        ("memorySizeMB", c_ulonglong),
    ]

    class c_nvmlGpuInstanceProfileInfo_t(Structure):
        _fields_ = _PROFILE_FIELDS

    class c_nvmlGpuInstanceProfileInfo_v2_t(Structure):
        _fields_ = [("version", c_uint), *_PROFILE_FIELDS, ("name", c_char * 96)]

    class struct_c_nvmlDevice_t(Structure):
        pass

    c_nvmlDevice_t = POINTER(struct_c_nvmlDevice_t)

    class struct_c_nvmlGpuInstance_t(Structure):
        pass

    c_nvmlGpuInstance_t = POINTER(struct_c_nvmlGpuInstance_t)

    class c_nvmlGpuInstanceInfo_t(Structure):
        _fields_ = [
            ("device", c_nvmlDevice_t),
            ("id", c_uint),
            ("profileId", c_uint),
            ("placement", c_nvmlGpuInstancePlacement_t),
        ]


def error_class(code: int) -> type:
    """The NVMLError subclass for ``code`` (NVMLError itself for unknown codes)."""
    return NVMLError._valClassMapping.get(code, NVMLError)


def error_name(code: int) -> str:
    for name, value in ERROR_CODES.items():
        if value == code:
            return name
    return f"NVML_ERROR_{code}"
