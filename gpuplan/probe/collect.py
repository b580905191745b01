"""Read one node's GPUs through NVML into a ``NodeInventory``.

The NVML module is a parameter (``pynvml`` on a node, ``gpuplan.probe.fake``
in tests), so every code path here runs without a GPU. Only ``nvml*Get*``
queries, ``nvmlInit`` and ``nvmlShutdown`` are called: the probe never changes
a GPU (no Set/Reset/Create/Destroy), which the fake enforces.

Failure policy:
- NVML cannot start (no library, no driver, no permission): ``NvmlUnavailable``;
  the CLI turns it into one line on stderr and exit code 5.
- One query on one GPU fails: the field stays null and the failure is recorded
  in that GPU's ``errors`` (field, NVML error name, code); the probe goes on.
- A query that answers "not supported" where that *is* the answer (MIG mode
  on a non-MIG GPU, NVLink on a PCIe card, a profile the GPU lacks) is data,
  not an error.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from gpuplan.probe.inventory import (
    EnableState,
    FieldError,
    GpuInfo,
    Metadata,
    MigInfo,
    MigInstance,
    MigProfile,
    NodeInventory,
    NvLink,
    PciInfo,
    Placement,
    Probe,
    SystemInfo,
    Topology,
)

NOT_SUPPORTED = 3
INVALID_ARGUMENT = 2
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15

ARCH_NAMES = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
    13: "rubin",
}

# nvmlDeviceGetTopologyCommonAncestor level -> `nvidia-smi topo -m` label.
# INTERNAL (two GPUs on one board, e.g. K80) sits behind the board's own PCIe
# switch, which topo -m prints as PIX.
TOPO_LABELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}

# GPU-instance profile index -> name suffix (go-nvlib's mapping, reference/mig/rules.md §5)
PROFILE_SUFFIX = {0x7: "+me", 0x8: "+me", 0xA: "+gfx", 0xB: "+gfx", 0xC: "+gfx", 0x11: "+gfx",
                  0xD: "-me", 0xE: "-me", 0xF: "+me.all", 0x10: "+me.all"}

# 64 CPUs per word; 16 words cover 1,024 CPUs, more than any GPU server has today.
CPU_SET_WORDS = 16
NODE_SET_WORDS = 4


class NvmlUnavailable(Exception):
    """NVML could not be used at all on this machine (exit code 5)."""

    def __init__(self, reason: str, nvml_error: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.nvml_error = nvml_error


# --- pure helpers -----------------------------------------------------------


def text(value: Any) -> str:
    """ctypes char arrays come back as bytes, wrapped functions as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def gfd_product(name: str) -> str:
    """`nvidia.com/gpu.product` as GPU Feature Discovery writes it."""
    return name.strip().replace(" ", "-")


def cuda_version(v: int) -> str:
    """12040 -> "12.4" (nvmlSystemGetCudaDriverVersion encodes 1000*major + 10*minor)."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def mask_bits(words: Sequence[int]) -> list[int]:
    out = []
    for w, word in enumerate(words):
        word = int(word)
        b = 0
        while word:
            if word & 1:
                out.append(w * 64 + b)
            word >>= 1
            b += 1
    return out


def cpulist(cpus: Sequence[int]) -> str:
    """[0,1,2,5] -> "0-2,5" (the Linux cpulist format)."""
    parts: list[str] = []
    cpus = sorted(set(cpus))
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def bus_key(bus_id: str) -> tuple[int, int, int, int] | str:
    """Normalise "00000000:1B:00.0" and legacy "0000:1b:00.0" to one key."""
    try:
        dom, bus, rest = bus_id.strip().split(":")
        dev, fn = rest.split(".")
        return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        return bus_id.strip().upper()


def mig_memory_gb(profile_mib: int, total_bytes: int) -> int:
    """go-nvlib's rule for the GB in a profile name (reference/mig/rules.md §5):
    the profile's share of memory, rounded up to eighths, times the board's
    memory in whole GB (rounded up)."""
    import math

    one_gb = 1024**3
    frac = (profile_mib * 1024 * 1024) / total_bytes
    frac = math.ceil(frac * 8) / 8
    total_gb = (total_bytes + one_gb - 1) // one_gb
    return int(round(frac * total_gb))


def profile_name(index: int, nvml_name: str, slices: int, memory_mib: int, total_bytes: int | None) -> str:
    """Profile name from NVML's v2 ``name`` ("MIG 1g.10gb"), or derived the way
    go-nvlib does it when the driver only has the v1 call."""
    name = nvml_name.strip()
    if name.upper().startswith("MIG "):
        name = name[4:].strip()
    if name:
        return name
    if not total_bytes:
        return f"{slices}g.{memory_mib}mb{PROFILE_SUFFIX.get(index, '')}"
    return f"{slices}g.{mig_memory_gb(memory_mib, total_bytes)}gb{PROFILE_SUFFIX.get(index, '')}"


# --- NVML access with error recording -----------------------------------------


class _Failed:
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __bool__(self) -> bool:
        return False


@dataclass
class _Errors:
    items: list[FieldError] = field(default_factory=list)
    lost: bool = False

    def add(self, field_name: str, code: int, names: dict[int, str]) -> None:
        e = FieldError(field=field_name, nvml_error=names.get(code, f"NVML_ERROR_{code}"), code=code)
        if e not in self.items:
            self.items.append(e)
        if code == GPU_IS_LOST:
            self.lost = True


class _Nvml:
    """Calls into the injected NVML module; turns NVMLError into _Failed."""

    def __init__(self, nvml: Any) -> None:
        self.m = nvml
        self.error_type = nvml.NVMLError
        self.names = {getattr(nvml, n): n for n in dir(nvml) if n.startswith("NVML_ERROR_")}

    def const(self, name: str, default: int) -> int:
        return int(getattr(self.m, name, default))

    def call(
        self,
        errors: _Errors | None,
        field_name: str,
        fn: str,
        *args: Any,
        quiet: Sequence[int] = (),
    ) -> Any:
        if errors is not None and errors.lost:
            return _Failed(GPU_IS_LOST)  # a lost GPU answers nothing more; say so once
        func: Callable[..., Any] | None = getattr(self.m, fn, None)
        if func is None:  # older bindings lack newer functions
            code = FUNCTION_NOT_FOUND
        else:
            try:
                return func(*args)
            except self.error_type as exc:
                code = int(getattr(exc, "value", -1))
        if errors is not None and code not in quiet:
            errors.add(field_name, code, self.names)
        return _Failed(code)


# --- the probe -------------------------------------------------------------------


@dataclass
class _Gpu:
    index: int
    handle: Any
    errors: _Errors
    data: dict[str, Any]
    links: list[NvLink]
    total_bytes: int | None = None


def probe_node(
    nvml: Any,
    *,
    node_name: str,
    hostname: str,
    version: str,
    source: str = "nvml",
    online_cpus: str | None = None,
) -> NodeInventory:
    """Read every GPU NVML can see (``online_cpus``: the node's online CPU list,
    from ``read_online_cpus``; NVML does not know it). Raises ``NvmlUnavailable`` when NVML
    cannot be initialised or cannot count the GPUs; anything else a GPU
    refuses is recorded in the inventory."""
    n = _Nvml(nvml)
    try:
        nvml.nvmlInit()
    except n.error_type as exc:
        raise _unavailable(n, int(getattr(exc, "value", -1))) from None
    try:
        return _probe(n, node_name=node_name, hostname=hostname, version=version, source=source,
                      online_cpus=online_cpus)
    finally:
        try:
            nvml.nvmlShutdown()
        except n.error_type:
            pass  # nothing left to release; the inventory is already read


_INIT_REASONS = {
    12: "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver here, or the container "
    "was not started with the NVIDIA runtime (runtimeClassName: nvidia, "
    "NVIDIA_DRIVER_CAPABILITIES=utility)",
    9: "the NVIDIA kernel driver is not loaded",
    18: "NVML library and NVIDIA kernel driver versions differ (driver updated without reboot?)",
    4: "no permission to open the NVIDIA devices (/dev/nvidiactl, /dev/nvidia*)",
    17: "the operating system blocked access to the NVIDIA devices",
}


def _unavailable(n: _Nvml, code: int) -> NvmlUnavailable:
    name = n.names.get(code, f"NVML_ERROR_{code}")
    reason = _INIT_REASONS.get(code, "NVML initialisation failed")
    return NvmlUnavailable(f"{reason} ({name})", name)


ONLINE_CPUS = "/sys/devices/system/cpu/online"


def read_online_cpus(path: str = ONLINE_CPUS) -> str | None:
    """The kernel's list of online CPUs (cpuset format, e.g. ``0-223``): the set the
    kubelet checks ``reservedSystemCPUs`` against (it takes the CPUs from cAdvisor's
    topology, which reads sysfs). None when unreadable or not a CPU list, so the
    fleet check is skipped rather than run against a wrong set."""
    from gpuplan.rules.topology import parse_cpuset

    try:
        with open(path, encoding="ascii") as f:
            text = f.read(4096).strip()
        parse_cpuset(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text or None


def _probe(n: _Nvml, *, node_name: str, hostname: str, version: str, source: str,
           online_cpus: str | None = None) -> NodeInventory:
    sys_err = _Errors()
    driver = n.call(sys_err, "driverVersion", "nvmlSystemGetDriverVersion")
    cuda = n.call(sys_err, "cudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2", quiet=(FUNCTION_NOT_FOUND,))
    if isinstance(cuda, _Failed) and cuda.code == FUNCTION_NOT_FOUND:
        cuda = n.call(sys_err, "cudaDriverVersion", "nvmlSystemGetCudaDriverVersion")
    nvml_ver = n.call(sys_err, "nvmlVersion", "nvmlSystemGetNVMLVersion")
    system = SystemInfo(
        hostname=hostname,
        driver_version=None if isinstance(driver, _Failed) else text(driver),
        cuda_driver_version=None if isinstance(cuda, _Failed) else cuda_version(int(cuda)),
        nvml_version=None if isinstance(nvml_ver, _Failed) else text(nvml_ver),
        online_cpus=online_cpus,
        errors=sys_err.items,
    )

    count = n.call(None, "gpuCount", "nvmlDeviceGetCount")
    if isinstance(count, _Failed):
        name = n.names.get(count.code, f"NVML_ERROR_{count.code}")
        raise NvmlUnavailable(f"NVML cannot count the GPUs ({name})", name)

    gpus: list[_Gpu] = []
    for i in range(int(count)):
        errs = _Errors()
        h = n.call(errs, "handle", "nvmlDeviceGetHandleByIndex", i)
        g = _Gpu(index=i, handle=None if isinstance(h, _Failed) else h, errors=errs, data={}, links=[])
        if g.handle is not None:
            _read_gpu(n, g)
        gpus.append(g)

    by_bus = {bus_key(g.data["pci"].bus_id): g.index for g in gpus if g.data.get("pci") is not None}
    for g in gpus:
        g.links = [
            l.model_copy(update={"remote_gpu": by_bus.get(bus_key(l.remote_bus_id))})
            if l.remote_bus_id is not None
            else l
            for l in g.links
        ]
        # a peer that is one of our GPUs is a GPU even when the type query failed
        g.links = [
            l.model_copy(update={"remote_type": "gpu"}) if l.remote_gpu is not None and l.remote_type in (None, "unknown") else l
            for l in g.links
        ]
    topology = _topology(n, gpus)
    return NodeInventory(
        metadata=Metadata(name=node_name),
        probe=Probe(version=version, source=source),
        system=system,
        gpus=[GpuInfo(index=g.index, **g.data, nvlinks=g.links, errors=g.errors.items) for g in gpus],
        topology=topology,
    )


def _ok(v: Any) -> bool:
    return not isinstance(v, _Failed)


def _read_gpu(n: _Nvml, g: _Gpu) -> None:
    h, e, d = g.handle, g.errors, g.data
    name = n.call(e, "name", "nvmlDeviceGetName", h)
    if _ok(name):
        d["name"] = text(name)
        d["product"] = gfd_product(text(name))
    uuid = n.call(e, "uuid", "nvmlDeviceGetUUID", h)
    if _ok(uuid):
        d["uuid"] = text(uuid)
    pci = n.call(e, "pci", "nvmlDeviceGetPciInfo", h)
    if _ok(pci):
        did = int(pci.pciDeviceId)
        d["pci"] = PciInfo(
            bus_id=text(pci.busId) or text(pci.busIdLegacy),
            device_id=f"0x{(did >> 16) & 0xFFFF:04X}",
            vendor_id=f"0x{did & 0xFFFF:04X}",
            subsystem_id=f"0x{int(pci.pciSubSystemId):08X}",
        )
    if "product" not in d and "pci" in d:
        d.update(_catalog_product(d["pci"].device_id))
    mem = n.call(e, "memoryMiB", "nvmlDeviceGetMemoryInfo", h)
    if _ok(mem):
        g.total_bytes = int(mem.total)
        d["memory_mib"] = g.total_bytes // (1024 * 1024)
    arch = n.call(e, "architecture", "nvmlDeviceGetArchitecture", h)
    if _ok(arch):
        d["architecture"] = ARCH_NAMES.get(int(arch), "unknown")
    cc = n.call(e, "computeCapability", "nvmlDeviceGetCudaComputeCapability", h)
    if _ok(cc):
        d["compute_capability"] = f"{int(cc[0])}.{int(cc[1])}"
    pm = n.call(e, "persistenceMode", "nvmlDeviceGetPersistenceMode", h)
    if _ok(pm):
        d["persistence_mode"] = int(pm) == n.const("NVML_FEATURE_ENABLED", 1)
    ecc = n.call(e, "ecc", "nvmlDeviceGetEccMode", h)
    if _ok(ecc):
        on = n.const("NVML_FEATURE_ENABLED", 1)
        d["ecc"] = EnableState(current=int(ecc[0]) == on, pending=int(ecc[1]) == on)
    mig = _read_mig(n, g)
    if mig is not None:
        d["mig"] = mig
    numa = _read_numa(n, g)
    if numa is not None:
        d["numa_node"] = numa
    aff = n.call(e, "cpuAffinity", "nvmlDeviceGetCpuAffinity", h, CPU_SET_WORDS)
    if _ok(aff):
        cpus = mask_bits(list(aff))
        if cpus:
            d["cpu_affinity"] = cpulist(cpus)
    g.links = _read_nvlinks(n, g)


def _catalog_product(device_id: str) -> dict[str, str]:
    """GFD product name from the GPU catalog by PCI id, when NVML refused the
    name (GFD itself derives it from the name, which is what we do otherwise)."""
    try:
        from gpuplan.catalog import resolve_gpu
    except ImportError:  # pragma: no cover - catalog is part of the package
        return {}
    model = resolve_gpu(device_id)
    product = getattr(model, "gfd_product", None) if model is not None else None
    return {"product": product} if product else {}


def _read_mig(n: _Nvml, g: _Gpu) -> MigInfo | None:
    h, e = g.handle, g.errors
    mode = n.call(e, "mig", "nvmlDeviceGetMigMode", h, quiet=(NOT_SUPPORTED,))
    if isinstance(mode, _Failed):
        # NOT_SUPPORTED is the answer "this GPU has no MIG" (go-nvlib IsMigCapable)
        return MigInfo(capable=False) if mode.code == NOT_SUPPORTED else None
    enable = n.const("NVML_DEVICE_MIG_ENABLE", 1)
    current, pending = int(mode[0]) == enable, int(mode[1]) == enable

    profiles: list[MigProfile] = []
    infos: list[Any] = []
    use_v1 = False
    for index in range(n.const("NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12)):
        # NOT_SUPPORTED: the GPU lacks this profile; INVALID_ARGUMENT: the driver
        # predates this profile index. Neither is a failure.
        quiet = (NOT_SUPPORTED, INVALID_ARGUMENT, FUNCTION_NOT_FOUND)
        if use_v1:
            info = n.call(e, "mig.profiles", "nvmlDeviceGetGpuInstanceProfileInfo", h, index, 1, quiet=quiet[:2])
        else:
            info = n.call(e, "mig.profiles", "nvmlDeviceGetGpuInstanceProfileInfo", h, index, quiet=quiet)
            if isinstance(info, _Failed) and info.code == FUNCTION_NOT_FOUND:
                use_v1 = True  # driver without the V (v2) call: names are derived instead
                info = n.call(e, "mig.profiles", "nvmlDeviceGetGpuInstanceProfileInfo", h, index, 1, quiet=quiet[:2])
        if isinstance(info, _Failed):
            continue
        infos.append(info)
        placements = _placements(n, g, int(info.id))
        profiles.append(
            MigProfile(
                id=int(info.id),
                name=profile_name(
                    index,
                    text(getattr(info, "name", b"")),
                    int(info.sliceCount),
                    int(info.memorySizeMB),
                    g.total_bytes,
                ),
                slice_count=int(info.sliceCount),
                instance_count=int(info.instanceCount),
                memory_size_mib=int(info.memorySizeMB),
                multiprocessor_count=int(info.multiprocessorCount),
                placements=placements,
            )
        )

    instances: list[MigInstance] | None = None
    if current:
        instances = _instances(n, g, infos, {p.id: p.name for p in profiles})
    profiles.sort(key=lambda p: (p.slice_count, p.memory_size_mib, p.name))
    return MigInfo(capable=True, current=current, pending=pending, profiles=profiles, instances=instances)


def _placements(n: _Nvml, g: _Gpu, profile_id: int) -> list[Placement] | None:
    """nvmlDeviceGetGpuInstancePossiblePlacements: ask for the count with a
    NULL array, then fill an array of that size (as go-nvml does). NVML answers
    NOT_SUPPORTED while MIG mode is off: placements stay unknown."""
    m, e = n.m, g.errors
    count = ctypes.c_uint(0)
    r = n.call(e, "mig.placements", "nvmlDeviceGetGpuInstancePossiblePlacements", g.handle, profile_id, None,
               ctypes.byref(count), quiet=(NOT_SUPPORTED,))
    if isinstance(r, _Failed):
        return None
    if count.value == 0:
        return []
    arr = (m.c_nvmlGpuInstancePlacement_t * count.value)()
    r = n.call(e, "mig.placements", "nvmlDeviceGetGpuInstancePossiblePlacements", g.handle, profile_id, arr,
               ctypes.byref(count), quiet=(NOT_SUPPORTED,))
    if isinstance(r, _Failed):
        return None
    out = [Placement(start=int(arr[i].start), size=int(arr[i].size)) for i in range(count.value)]
    return sorted(out, key=lambda p: (p.start, p.size))


def _instances(n: _Nvml, g: _Gpu, infos: list[Any], names: dict[int, str]) -> list[MigInstance] | None:
    """Existing GPU instances, per profile: the array is sized by the profile's
    instanceCount and ``count`` returns how many exist. Listing needs the MIG
    monitor capability (root, or NVIDIA_MIG_MONITOR_DEVICES in a container);
    NO_PERMISSION is recorded and the list left null (unknown, not empty)."""
    m, e = n.m, g.errors
    out: list[MigInstance] = []
    for info in infos:
        cap = int(info.instanceCount)
        if cap <= 0:
            continue
        arr = (m.c_nvmlGpuInstance_t * cap)()
        count = ctypes.c_uint(cap)
        r = n.call(e, "mig.instances", "nvmlDeviceGetGpuInstances", g.handle, int(info.id), arr, ctypes.byref(count),
                   quiet=(NOT_SUPPORTED,))
        if isinstance(r, _Failed):
            if r.code == NOT_SUPPORTED:
                continue
            return None
        for i in range(count.value):
            gi = n.call(e, "mig.instances", "nvmlGpuInstanceGetInfo", arr[i])
            if isinstance(gi, _Failed):
                return None
            out.append(
                MigInstance(
                    id=int(gi.id),
                    profile_id=int(gi.profileId),
                    profile=names.get(int(gi.profileId)),
                    placement=Placement(start=int(gi.placement.start), size=int(gi.placement.size)),
                )
            )
    return sorted(out, key=lambda x: (x.placement.start, x.id))


def _read_numa(n: _Nvml, g: _Gpu) -> int | None:
    """nvmlDeviceGetNumaNodeId (R5xx drivers and newer bindings); older drivers
    answer FUNCTION_NOT_FOUND or NOT_SUPPORTED, then the memory affinity mask
    (node scope) says the same when it names exactly one node. Negative ids
    mean "no NUMA information" (single-node machine)."""
    h, e = g.handle, g.errors
    v = n.call(e, "numaNode", "nvmlDeviceGetNumaNodeId", h, quiet=(FUNCTION_NOT_FOUND, NOT_SUPPORTED))
    if _ok(v):
        return int(v) if int(v) >= 0 else None
    if isinstance(v, _Failed) and v.code not in (FUNCTION_NOT_FOUND, NOT_SUPPORTED):
        return None
    first = v.code
    scope = n.const("NVML_AFFINITY_SCOPE_NODE", 0)
    mask = n.call(None, "numaNode", "nvmlDeviceGetMemoryAffinity", h, NODE_SET_WORDS, scope)
    if _ok(mask):
        nodes = mask_bits(list(mask))
        if len(nodes) == 1:
            return nodes[0]
        return None
    e.add("numaNode", first, n.names)
    return None


def _read_nvlinks(n: _Nvml, g: _Gpu) -> list[NvLink]:
    h, e = g.handle, g.errors
    per_link: list[tuple[int, bool, str | None, str | None]] = []
    for link in range(n.const("NVML_NVLINK_MAX_LINKS", 18)):
        st = n.call(e, "nvlinks", "nvmlDeviceGetNvLinkState", h, link, quiet=(NOT_SUPPORTED, INVALID_ARGUMENT))
        if isinstance(st, _Failed):
            if st.code == NOT_SUPPORTED and link == 0:
                break  # no NVLink on this GPU at all
            if g.errors.lost:
                break
            continue  # past this GPU's last link (the constant is the max over all GPUs)
        if int(st) != n.const("NVML_FEATURE_ENABLED", 1):
            per_link.append((link, False, None, None))
            continue
        remote = n.call(e, "nvlinks", "nvmlDeviceGetNvLinkRemotePciInfo", h, link)
        bus = (text(remote.busId) or text(remote.busIdLegacy)) if _ok(remote) else None
        rtype = n.call(None, "nvlinks", "nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
        per_link.append((link, True, bus, REMOTE_TYPES.get(int(rtype), "unknown") if _ok(rtype) else None))
    # one entry per (state, remote end), links in order: 18 links -> 4 NVSwitch entries
    groups: dict[tuple[bool, str | None, str | None], list[int]] = {}
    for link, active, bus, rtype in per_link:
        groups.setdefault((active, bus, rtype), []).append(link)
    return [
        NvLink(links=links, active=active, remote_bus_id=bus, remote_type=rtype)
        for (active, bus, rtype), links in groups.items()
    ]


def _topology(n: _Nvml, gpus: list[_Gpu]) -> Topology:
    errs = _Errors()
    size = len(gpus)
    matrix = [["X" if i == j else "UNKNOWN" for j in range(size)] for i in range(size)]
    switch_links = [sum(len(l.links) for l in g.links if l.active and l.remote_type == "switch") for g in gpus]
    for i in range(size):
        for j in range(i + 1, size):
            a, b = gpus[i], gpus[j]
            direct = max(
                sum(len(l.links) for l in a.links if l.active and l.remote_gpu == b.index),
                sum(len(l.links) for l in b.links if l.active and l.remote_gpu == a.index),
            )
            # NVSwitch systems: every GPU reaches every other through the
            # switches; topo -m prints NV<links per GPU> for each pair.
            via_switch = min(switch_links[i], switch_links[j])
            nv = direct or via_switch
            if nv:
                label = f"NV{nv}"
            elif a.handle is None or b.handle is None:
                label = "UNKNOWN"
            else:
                lvl = n.call(errs, "topology", "nvmlDeviceGetTopologyCommonAncestor", a.handle, b.handle)
                label = TOPO_LABELS.get(int(lvl), "UNKNOWN") if _ok(lvl) else "UNKNOWN"
            matrix[i][j] = matrix[j][i] = label
    return Topology(gpus=[g.index for g in gpus], matrix=matrix, errors=errs.items)
