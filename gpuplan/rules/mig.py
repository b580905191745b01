"""MIG geometry rules: is every pool's layout creatable on its GPU model, and
does the node-level strategy work with it?

The decision is the MIG engine's (``gpuplan.mig.solver``, exact placement
search); this module only maps its findings to codes and to the line of
``fleet.yaml`` that holds the layout.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.spec.models import Mig
from gpuplan.spec.validate import E_UNKNOWN_GPU

E_UNKNOWN_PROFILE = Code(
    "GP201", "MIG profile does not exist on this GPU", Severity.ERROR,
    "Profile names are per GPU model: 1g.10gb means a single-memory slice on A100-80GB but a "
    "double-memory one on A100-40GB, and 4g.20gb does not exist on A100-80GB.",
    bad="gpu: A100-SXM4-80GB\nsharing: {mode: mig, layout: {4g.20gb: 1}}",
    good="gpu: A100-SXM4-80GB\nsharing: {mode: mig, layout: {4g.40gb: 1}}",
    pain="#1 NVIDIA/gpu-operator #262, #3 NVIDIA/gpu-operator #351",
)
E_COUNT = Code(
    "GP202", "MIG profile count above its limit", Severity.ERROR,
    "A profile is requested more often than one GPU allows (e.g. 3g at most twice).",
    bad="layout: {3g.40gb: 3}", good="layout: {3g.40gb: 2}",
)
E_MEDIA = Code(
    "GP203", "media-extension profiles exclude each other", Severity.ERROR,
    "A GPU has one set of media engines: at most one +me instance, and +me.all excludes "
    "every profile but -me ones.",
    bad="layout: {1g.10gb+me: 2}", good="layout: {1g.10gb+me: 1, 1g.10gb: 5}",
)
E_PLACEMENT = Code(
    "GP204", "MIG layout cannot be placed", Severity.ERROR,
    "Every count is allowed, but the instances cannot all get an allowed placement without "
    "sharing a memory slice (e.g. 3g+3g+1g needs 9 of 8 memory slices).",
    bad="layout: {3g.40gb: 2, 1g.10gb: 1}", good="layout: {4g.40gb: 1, 3g.40gb: 1}",
    pain="#1 NVIDIA/gpu-operator #262, #6 NVIDIA/mig-parted #189",
)
E_DRIVER = Code(
    "GP205", "MIG layout needs a newer driver", Severity.ERROR,
    "The layout uses a profile or combination that the configured driver branch cannot create "
    "(e.g. 4g+3g on A100 needs R510).",
    bad="driverVersion: \"470.82.01\"\nlayout: {4g.40gb: 1, 3g.40gb: 1}",
    good="driverVersion: \"550.90.07\"\nlayout: {4g.40gb: 1, 3g.40gb: 1}",
)
E_NOT_MIG = Code(
    "GP206", "MIG on a GPU without MIG", Severity.ERROR,
    "The pool's GPU model does not support MIG (T4, V100, A10, A10G, A40, L4, L40, L40S...). "
    "mig-parted would silently do nothing on such a node.",
    bad="gpu: L40S\nsharing: {mode: mig, layout: {1g.12gb: 4}}",
    good="gpu: L40S\nsharing: {mode: time-slicing, replicas: 4}",
    pain="#25 (mig-parted silently no-ops on unsupported GPU)",
)
E_MIG_PARTED_SCHEMA = Code(
    "GP207", "mig-parted config does not follow its schema", Severity.ERROR,
    "`gpuplan mig check --mig-parted`: the file breaks mig-parted's v1 config schema "
    "(unknown keys, mig-devices with mig-enabled: false, bad device-filter).",
    bad="mig-configs:\n  x:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {1g.10gb: 7}",
    good="mig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: 7}",
)
W_UNKNOWN_DEVICE = Code(
    "GP208", "device-filter matches no known GPU", Severity.WARNING,
    "`gpuplan mig check --mig-parted`: a device-filter id is not in gpuplan's catalog, so its "
    "layouts cannot be checked.",
    bad='- device-filter: "0x12345678"\n  devices: all\n  mig-enabled: true\n  mig-devices: {1g.10gb: 7}',
    good='- device-filter: "0x20B210DE"  # A100-SXM4-80GB\n  devices: all\n  mig-enabled: true\n  mig-devices: {1g.10gb: 7}',
)
E_SINGLE = Code(
    "GP209", "single strategy needs one identical profile on every GPU", Severity.ERROR,
    "Under the `single` MIG strategy the device plugin advertises every MIG device as "
    "nvidia.com/gpu, so every GPU of a node must be MIG-enabled and carry the same one profile; "
    "otherwise the plugin fails ('more than one MIG device type present on node') and GFD labels "
    "the node <model>-MIG-INVALID.",
    bad="sharing: {mode: mig, strategy: single, layout: {3g.40gb: 1, 2g.20gb: 1}}",
    good="sharing: {mode: mig, strategy: single, layout: {3g.40gb: 2}}",
    pain="#10 NVIDIA/gpu-operator #460, #11 NVIDIA/gpu-operator #479",
)
W_NO_RESOURCE = Code(
    "GP210", "MIG profile gets no resource", Severity.WARNING,
    "Under `mixed`, only profiles whose compute-instance count equals the GPU-instance count "
    "(no `<c>c.` prefix) are advertised; such instances are created but no pod can request them.",
    bad="layout: {1c.3g.40gb: 1}", good="layout: {3g.40gb: 1}",
)
E_DEVICE_INDEX = Code(
    "GP211", "per-GPU layout names a GPU the node does not have", Severity.ERROR,
    "`devices` indices must be between 0 and gpusPerNode-1, and every GPU of the node must be "
    "covered (so its MIG state is declared, not left to chance).",
    bad="gpusPerNode: 4\ndevices:\n  - {devices: [0, 1], layout: {3g.40gb: 2}}\n  - {devices: [4], layout: {7g.80gb: 1}}",
    good="gpusPerNode: 4\ndevices:\n  - {devices: [0, 1], layout: {3g.40gb: 2}}\n  - {devices: [2, 3]}",
)

CODES = (
    E_UNKNOWN_PROFILE, E_COUNT, E_MEDIA, E_PLACEMENT, E_DRIVER, E_NOT_MIG, E_MIG_PARTED_SCHEMA,
    W_UNKNOWN_DEVICE, E_SINGLE, W_NO_RESOURCE, E_DEVICE_INDEX,
)


def _failure_code(kind: str) -> Code:
    return {
        "unknown-profile": E_UNKNOWN_PROFILE,
        "count-limit": E_COUNT,
        "media-exclusive": E_MEDIA,
        "no-placement": E_PLACEMENT,
        "driver-too-old": E_DRIVER,
        "not-mig-capable": E_NOT_MIG,
    }[kind]


def _layouts(pv: PoolView) -> Iterator[tuple[tuple, dict[str, int]]]:
    """(spec path of the layout, layout) for each distinct layout of a MIG pool."""
    s = pv.pool.sharing
    assert isinstance(s, Mig)
    base = pv.path + ("sharing",)
    if s.layout is not None:
        yield base + ("layout",), dict(s.layout)
    for g, group in enumerate(s.devices or ()):
        if group.layout is not None:
            yield base + ("devices", g, "layout"), dict(group.layout)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    from gpuplan.catalog import suggest_gpus

    driver = rf.fleet.spec.cluster.gpu_operator.driver_version
    for pv in rf.pools:
        if pv.gpu is None:
            sugg = suggest_gpus(pv.pool.gpu)
            yield rf.diag(
                E_UNKNOWN_GPU, f"unknown GPU model {pv.pool.gpu!r}", pv.path + ("gpu",),
                hint=(f"did you mean {sugg[0]!r}?" if sugg else "run `gpuplan mig profiles --help` "
                      "for the catalog") + " (GFD product name, nvidia-smi name, alias or PCI id)",
            )
            continue
        if isinstance(pv.pool.sharing, Mig):
            yield from _check_mig_pool(rf, pv, driver)


def _check_mig_pool(rf: ResolvedFleet, pv: PoolView, driver: str | None) -> Iterator[Diagnostic]:
    from gpuplan.mig.layout import check_node
    from gpuplan.mig.solver import check_layout

    gpu = pv.gpu
    assert gpu is not None
    s = pv.pool.sharing
    assert isinstance(s, Mig)
    if not gpu.mig_capable:
        yield rf.diag(E_NOT_MIG, f"{gpu.key} does not support MIG", pv.path + ("sharing", "mode"),
                      hint="use time-slicing or MPS to share this GPU, or a MIG-capable model "
                           "(A100, A30, H100, H200, B200...)")
        return

    layout_ok = True
    for path, layout in _layouts(pv):
        result = check_layout(gpu, layout, driver=driver)
        if result.ok:
            continue
        layout_ok = False
        f = result.failure
        assert f is not None
        code = _failure_code(f.kind.value)
        at = path
        if f.profile is not None and f.profile in layout:
            at = path + (f.profile,)
        hint_parts = []
        if f.did_you_mean:
            hint_parts.append(f"did you mean {f.did_you_mean[0]!r}?")
        if result.suggestions:
            shown = "; ".join(f"{{{s.text}}}" for s in result.suggestions[:3])
            hint_parts.append(f"creatable layouts nearby: {shown}")
        msg = f.message if gpu.key in f.message else f"{gpu.key}: {f.message}"
        yield rf.diag(code, msg, at, key=f.profile is not None,
                      hint=" — ".join(hint_parts) or None)

    if s.devices is not None and pv.gpus_per_node:
        n = pv.gpus_per_node
        covered: set[int] = set()
        for g, group in enumerate(s.devices):
            for k, idx in enumerate(group.devices):
                covered.add(idx)
                if idx >= n:
                    yield rf.diag(E_DEVICE_INDEX,
                                  f"GPU index {idx} does not exist: pool {pv.name!r} has {n} GPUs per node (0-{n - 1})",
                                  pv.path + ("sharing", "devices", g, "devices", k))
        missing = sorted(set(range(n)) - covered)
        if missing:
            yield rf.diag(E_DEVICE_INDEX,
                          f"GPU indices {', '.join(map(str, missing))} of pool {pv.name!r} have no entry",
                          pv.path + ("sharing", "devices"), key=True,
                          hint="add a group for them; a group without `layout` leaves MIG disabled")

    if not layout_ok or not pv.gpus_per_node:
        return
    for p in check_node(gpu, pv.gpu_layouts(), s.strategy):
        kind = p.kind.value
        if kind.startswith("single"):
            yield rf.diag(E_SINGLE, p.message, pv.path + ("sharing", "strategy"),
                          hint="use strategy: mixed, or one profile repeated on every GPU")
        elif kind == "no-mixed-resource":
            yield rf.diag(W_NO_RESOURCE, p.message, pv.path + ("sharing",), key=True)
        elif kind == "not-mig-capable":
            yield rf.diag(E_NOT_MIG, p.message, pv.path + ("sharing", "mode"))
