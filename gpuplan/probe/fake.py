"""A stand-in for the ``pynvml`` module, driven by a YAML fixture.

It exposes the functions the probe calls under pynvml's names and signatures,
takes and returns the same ctypes structures (opaque device and GPU-instance
handles, ``byref`` counts, caller-allocated arrays) and raises pynvml's own
``NVMLError`` subclasses (``gpuplan.probe._nvml_compat``) with the codes real
NVML returns:

- every call before ``nvmlInit`` (or after the last ``nvmlShutdown``): UNINITIALIZED;
- ``init: LIBRARY_NOT_FOUND`` / ``DRIVER_NOT_LOADED`` / ...: ``nvmlInit`` fails so;
- MIG queries on a GPU without MIG: NOT_SUPPORTED; placements and instances
  while MIG mode is off: NOT_SUPPORTED; a profile index the GPU lacks:
  NOT_SUPPORTED, one past the driver's table: INVALID_ARGUMENT;
- NVLink queries on a GPU without NVLink: NOT_SUPPORTED; a link number past
  the GPU's links: INVALID_ARGUMENT;
- ``missingFunctions``: FUNCTION_NOT_FOUND (an older driver);
- per GPU ``fail: {nvmlDeviceGetEccMode: CORRUPTED_INFOROM}``: that query fails.

Any mutating NVML function (Set*, *Reset*, Create*, *Destroy*, Clear*, ...)
raises ``FakeMutationError`` and is recorded in ``mutations``; every call is
counted in ``calls``. Fixture format: docs/probe.md.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from gpuplan.probe import _nvml_compat as base

MUTATING = re.compile(
    r"^nvml(Device|GpuInstance|ComputeInstance|Vgpu\w*|System|Unit|Gpm\w*)?"
    r"(Set|Reset|Create|Destroy|Clear|Modify|Remove|Discover|Freeze|Register|Write|Issue|Inject|Power|Start|Stop)"
    r"|Reset|Destroy|Create"
)

# NVML_ERROR_* names the fixtures may use, without the prefix
ERRORS = {name.replace("NVML_ERROR_", ""): code for name, code in base.ERROR_CODES.items()}

_DEVICE_TOKEN = 0x6E760000  # "nv" - opaque handle values, never dereferenced
_GI_TOKEN = 0x67690000  # "gi"


class FakeMutationError(AssertionError):
    """The probe called an NVML function that changes the GPU."""


class FixtureError(ValueError):
    """The fixture file itself is malformed."""


def _err(name_or_code: str | int) -> Exception:
    code = name_or_code if isinstance(name_or_code, int) else ERRORS[str(name_or_code).upper()]
    return base.NVMLError(code)


def _deref(ref: Any) -> Any:
    """The ctypes object behind ``byref(x)`` / ``pointer(x)`` / ``x``."""
    if hasattr(ref, "_obj"):
        return ref._obj
    if hasattr(ref, "contents"):
        return ref.contents
    return ref


def _parse_cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def _words(bits: list[int], n: int) -> Any:
    arr = (ctypes.c_ulonglong * n)()
    for b in bits:
        if b // 64 < n:
            arr[b // 64] |= 1 << (b % 64)
    return arr


class FakeNvml:
    """One fake NVML library instance (state: init refcount, call counters)."""

    def __init__(self, fixture: Mapping[str, Any], *, name: str = "<fixture>") -> None:
        self.fixture_name = name
        self.node = dict(fixture.get("node", {}))
        system = dict(fixture.get("system", {}))
        self.system = system
        self.init_error = system.get("init")
        self.missing = set(system.get("missingFunctions", []))
        tables = fixture.get("profileTables", {}) or {}
        defaults = dict(fixture.get("defaults", {}) or {})
        self.switch_links: dict[str, Any] = dict(fixture.get("nvswitches", {}) or {})
        self.gpus: list[dict[str, Any]] = []
        for raw in fixture.get("gpus", []) or []:
            gpu = {**defaults, **raw}
            prof = gpu.get("migProfiles")
            if isinstance(prof, str):
                if prof not in tables:
                    raise FixtureError(f"{name}: unknown profile table {prof!r}")
                gpu["migProfiles"] = tables[prof]
            self.gpus.append(gpu)
        self.by_bus = {g["pci"]["busId"].upper(): i for i, g in enumerate(self.gpus)}
        self._refcount = 0
        self.calls: Counter[str] = Counter()
        self.mutations: list[str] = []
        self._gi: dict[int, tuple[int, dict[str, Any]]] = {}
        # constants, error classes and ctypes types exactly as pynvml has them
        for n in (*base.ERROR_CODES, *base.CONSTANTS, *base.STRUCTS):
            if hasattr(base, n):
                setattr(self, n, getattr(base, n))
        self.NVMLError = base.NVMLError
        for n in base.ERROR_CODES:
            cls = base._class_name(n)
            if hasattr(base, cls):
                setattr(self, cls, getattr(base, cls))

    # --- guard rails --------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml") and MUTATING.search(name):

            def mutating(*args: Any, **kwargs: Any) -> Any:
                self.mutations.append(name)
                raise FakeMutationError(f"the probe called the mutating NVML function {name}")

            return mutating
        raise AttributeError(name)

    def _enter(self, fn: str) -> None:
        self.calls[fn] += 1
        if fn in self.missing:
            raise _err("FUNCTION_NOT_FOUND")
        if self._refcount <= 0:
            raise _err("UNINITIALIZED")

    def _gpu(self, fn: str, handle: Any) -> dict[str, Any]:
        self._enter(fn)
        try:
            value = ctypes.cast(handle, ctypes.c_void_p).value
        except (ctypes.ArgumentError, TypeError):
            raise _err("INVALID_ARGUMENT") from None
        if value is None or not (_DEVICE_TOKEN <= value < _DEVICE_TOKEN + len(self.gpus)):
            raise _err("INVALID_ARGUMENT")
        gpu = self.gpus[value - _DEVICE_TOKEN]
        if gpu.get("lost"):
            raise _err("GPU_IS_LOST")
        fail = (gpu.get("fail") or {}).get(fn)
        if fail:
            raise _err(fail)
        return gpu

    def _handle(self, index: int) -> Any:
        return ctypes.cast(ctypes.c_void_p(_DEVICE_TOKEN + index), self.c_nvmlDevice_t)

    # --- init ---------------------------------------------------------------

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.calls["nvmlInitWithFlags"] += 1
        if self.init_error:
            raise _err(self.init_error)
        self._refcount += 1

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._refcount -= 1

    # --- system -------------------------------------------------------------

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(self.system["driverVersion"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(self.system["cudaDriverVersion"])

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return int(self.system["cudaDriverVersion"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(self.system["nvmlVersion"])

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= int(index) < len(self.gpus):
            raise _err("INVALID_ARGUMENT")
        fail = (self.gpus[index].get("fail") or {}).get("nvmlDeviceGetHandleByIndex")
        if fail:
            raise _err(fail)
        return self._handle(int(index))

    # --- device identity ------------------------------------------------------

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return str(self._gpu("nvmlDeviceGetName", handle)["name"])

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return str(self._gpu("nvmlDeviceGetUUID", handle)["uuid"])

    def _pci(self, bus_id: str, device_id: int, subsystem: int = 0) -> Any:
        info = self.nvmlPciInfo_t()
        dom, bus, rest = bus_id.split(":")
        dev = rest.split(".")[0]
        info.busId = bus_id.encode()
        info.busIdLegacy = f"{int(dom, 16):04X}:{bus}:{rest}".encode()
        info.domain, info.bus, info.device = int(dom, 16), int(bus, 16), int(dev, 16)
        info.pciDeviceId = (int(device_id) << 16) | 0x10DE  # (device << 16) | vendor
        info.pciSubSystemId = int(subsystem)
        return info

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        g = self._gpu("nvmlDeviceGetPciInfo", handle)
        p = g["pci"]
        return self._pci(p["busId"], int(p["deviceId"]), int(p.get("subsystemId", 0)))

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        g = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        m = self.c_nvmlMemory_t()
        m.total = int(g["memoryMiB"]) * 1024 * 1024
        m.used = int(g.get("usedMiB", 0)) * 1024 * 1024
        m.free = m.total - m.used
        return m

    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        return int(self._gpu("nvmlDeviceGetArchitecture", handle)["architecture"])

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        major, minor = self._gpu("nvmlDeviceGetCudaComputeCapability", handle)["computeCapability"]
        return (int(major), int(minor))

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return int(self._gpu("nvmlDeviceGetPersistenceMode", handle).get("persistenceMode", 1))

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        g = self._gpu("nvmlDeviceGetEccMode", handle)
        if g.get("ecc") is None:
            raise _err("NOT_SUPPORTED")
        cur, pend = g["ecc"]
        return [int(cur), int(pend)]

    # --- NUMA / CPU ---------------------------------------------------------

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        g = self._gpu("nvmlDeviceGetNumaNodeId", handle)
        if g.get("numaNode") is None:
            raise _err("NOT_SUPPORTED")
        return int(g["numaNode"])

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        g = self._gpu("nvmlDeviceGetMemoryAffinity", handle)
        node = g.get("numaNode")
        return _words([] if node is None or node < 0 else [int(node)], int(nodeSetSize))

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        g = self._gpu("nvmlDeviceGetCpuAffinity", handle)
        return _words(_parse_cpulist(g.get("cpuAffinity", "")), int(cpuSetSize))

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        a = self._gpu("nvmlDeviceGetTopologyCommonAncestor", device1)
        b = self._gpu("nvmlDeviceGetTopologyCommonAncestor", device2)
        self.calls["nvmlDeviceGetTopologyCommonAncestor"] -= 1  # one call, two handle checks
        if a is b:
            return base.CONSTANTS["NVML_TOPOLOGY_INTERNAL"]
        sa, sb = list(a.get("pcieSwitches", [])), list(b.get("pcieSwitches", []))
        if sa and sb and sa[-1] == sb[-1]:
            return base.CONSTANTS["NVML_TOPOLOGY_SINGLE"]
        if set(sa) & set(sb):
            return base.CONSTANTS["NVML_TOPOLOGY_MULTIPLE"]
        if a.get("hostBridge") is not None and a.get("hostBridge") == b.get("hostBridge"):
            return base.CONSTANTS["NVML_TOPOLOGY_HOSTBRIDGE"]
        if a.get("numaNode") == b.get("numaNode") or a.get("socket", 0) == b.get("socket", 1):
            return base.CONSTANTS["NVML_TOPOLOGY_NODE"]
        return base.CONSTANTS["NVML_TOPOLOGY_SYSTEM"]

    # --- NVLink -------------------------------------------------------------

    def _link(self, fn: str, handle: Any, link: int) -> tuple[dict[str, Any], Any]:
        g = self._gpu(fn, handle)
        spec = g.get("nvlinks")
        if spec is None:
            raise _err("NOT_SUPPORTED")
        links = self._expand_links(spec)
        if not 0 <= int(link) < len(links):
            raise _err("INVALID_ARGUMENT")
        return g, links[int(link)]

    def _expand_links(self, spec: Any) -> list[Any]:
        # list of peers, one per link: "switch:<name>", "gpu:<index>" or None (inactive);
        # or {count: n, inactive: true}
        if isinstance(spec, dict):
            return [None] * int(spec.get("count", 0))
        out: list[Any] = []
        for item in spec:
            if isinstance(item, dict):  # {peer: ..., links: n}
                out.extend([item.get("peer")] * int(item.get("links", 1)))
            else:
                out.append(item)
        return out

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        _, peer = self._link("nvmlDeviceGetNvLinkState", device, link)
        return 1 if peer else 0

    def _remote_bus(self, peer: str) -> str:
        kind, _, ref = str(peer).partition(":")
        if kind == "gpu":
            return self.gpus[int(ref)]["pci"]["busId"]
        if kind == "switch":
            return str(self.switch_links[ref]["busId"])
        raise FixtureError(f"{self.fixture_name}: unknown NVLink peer {peer!r}")

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        _, peer = self._link("nvmlDeviceGetNvLinkRemotePciInfo", device, link)
        if not peer:
            raise _err("NOT_SUPPORTED")  # inactive link: no remote end
        kind, _, ref = str(peer).partition(":")
        if kind == "gpu":
            p = self.gpus[int(ref)]["pci"]
            return self._pci(p["busId"], int(p["deviceId"]), int(p.get("subsystemId", 0)))
        sw = self.switch_links[ref]
        return self._pci(str(sw["busId"]), int(sw.get("deviceId", 0x22A3)))

    nvmlDeviceGetNvLinkRemotePciInfo_v2 = nvmlDeviceGetNvLinkRemotePciInfo

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        _, peer = self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        if not peer:
            raise _err("NOT_SUPPORTED")
        kind = str(peer).partition(":")[0]
        return {"gpu": 0x00, "switch": 0x02}.get(kind, 0xFF)

    # --- MIG ----------------------------------------------------------------

    def _mig(self, fn: str, handle: Any) -> dict[str, Any]:
        g = self._gpu(fn, handle)
        if g.get("migMode") is None:
            raise _err("NOT_SUPPORTED")  # not MIG-capable (T4, L4, V100, ...)
        return g

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        g = self._mig("nvmlDeviceGetMigMode", device)
        cur, pend = g["migMode"]
        return [int(cur), int(pend)]

    def _profile(self, g: dict[str, Any], *, index: int | None = None, pid: int | None = None) -> dict[str, Any]:
        for p in g.get("migProfiles", []):
            if (index is not None and int(p["index"]) == index) or (pid is not None and int(p["id"]) == pid):
                return p
        raise _err("NOT_SUPPORTED")

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        fn = "nvmlDeviceGetGpuInstanceProfileInfoV" if version == 2 else "nvmlDeviceGetGpuInstanceProfileInfo"
        g = self._mig(fn, device)
        if not 0 <= int(profile) < int(self.system.get("profileCount", base.CONSTANTS["NVML_GPU_INSTANCE_PROFILE_COUNT"])):
            raise _err("INVALID_ARGUMENT")
        p = self._profile(g, index=int(profile))
        if version == 2:
            info = self.c_nvmlGpuInstanceProfileInfo_v2_t()
            info.name = f"MIG {p['name']}".encode()
        elif version == 1:
            info = self.c_nvmlGpuInstanceProfileInfo_t()
        else:
            raise _err("FUNCTION_NOT_FOUND")
        info.id = int(p["id"])
        info.isP2pSupported = 0
        info.sliceCount = int(p["slices"])
        info.instanceCount = int(p["max"])
        info.multiprocessorCount = int(p.get("sms", 0))
        info.memorySizeMB = int(p["memoryMiB"])
        return info

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device: Any, profileId: int, placementsRef: Any, countRef: Any) -> int:
        g = self._mig("nvmlDeviceGetGpuInstancePossiblePlacements", device)
        if int(g["migMode"][0]) != 1:
            raise _err("NOT_SUPPORTED")  # MIG mode off
        if countRef is None:
            raise _err("INVALID_ARGUMENT")
        p = self._profile(g, pid=int(profileId))
        starts = [int(s) for s in p["starts"]]
        count = _deref(countRef)
        if placementsRef is not None:
            if len(placementsRef) < len(starts):
                raise _err("INSUFFICIENT_SIZE")
            for i, s in enumerate(starts):
                placementsRef[i].start = s
                placementsRef[i].size = int(p["size"])
        count.value = len(starts)
        return 0

    nvmlDeviceGetGpuInstancePossiblePlacements_v2 = nvmlDeviceGetGpuInstancePossiblePlacements

    def nvmlDeviceGetGpuInstances(self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any) -> int:
        g = self._mig("nvmlDeviceGetGpuInstances", device)
        if int(g["migMode"][0]) != 1:
            raise _err("NOT_SUPPORTED")
        self._profile(g, pid=int(profileId))
        mine = [gi for gi in g.get("migInstances", []) if int(gi["profileId"]) == int(profileId)]
        count = _deref(countRef)
        if gpuInstancesRef is None or count.value < len(mine) or len(gpuInstancesRef) < len(mine):
            raise _err("INSUFFICIENT_SIZE")
        gpu_index = self.gpus.index(g)
        for i, gi in enumerate(mine):
            token = _GI_TOKEN + gpu_index * 64 + int(gi["id"])
            self._gi[token] = (gpu_index, gi)
            gpuInstancesRef[i] = ctypes.cast(ctypes.c_void_p(token), self.c_nvmlGpuInstance_t)
        count.value = len(mine)
        return 0

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        self._enter("nvmlGpuInstanceGetInfo")
        token = ctypes.cast(gpuInstance, ctypes.c_void_p).value
        if token not in self._gi:
            raise _err("INVALID_ARGUMENT")
        gpu_index, gi = self._gi[token]
        info = self.c_nvmlGpuInstanceInfo_t()
        info.device = self._handle(gpu_index)
        info.id = int(gi["id"])
        info.profileId = int(gi["profileId"])
        info.placement.start = int(gi["start"])
        info.placement.size = int(gi["size"])
        return info

    # --- read-only reporting -------------------------------------------------

    @property
    def read_functions_called(self) -> set[str]:
        return {name for name, n in self.calls.items() if n > 0}


def load_fake(path: str | Path) -> FakeNvml:
    """A FakeNvml for the fixture at ``path`` (YAML)."""
    import yaml  # fixtures are ours; PyYAML's C loader keeps the benchmark honest

    from gpuplan.spec.loader import LoadError, read_source

    p = Path(path)
    try:
        data = yaml.load(read_source(p), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except LoadError as exc:
        raise FixtureError(f"cannot read NVML fixture {p}: {exc.diag.message}") from None
    except yaml.YAMLError as exc:
        raise FixtureError(f"cannot read NVML fixture {p}: {exc}") from None
    if not isinstance(data, dict):
        raise FixtureError(f"NVML fixture {p} is not a mapping")
    return FakeNvml(data, name=str(p))
