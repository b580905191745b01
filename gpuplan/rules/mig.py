"""MIG geometry rules: is every pool's layout creatable on its GPU model, and
does the node-level strategy work with it?

The decision is the MIG engine's (``gpuplan.mig.solver``, exact placement
search); this module only maps its findings to codes and to the line of
``fleet.yaml`` that holds the layout.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.mig.codes import E_NOT_MIG, FAILURE_CODES
from gpuplan.rules.cascade import GPU, SHARING
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.spec.models import Mig
from gpuplan.spec.validate import E_UNKNOWN_GPU

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

CODES = (E_SINGLE, W_NO_RESOURCE, E_DEVICE_INDEX)  # GP201-GP208: gpuplan.mig.codes

# the pool values these errors refuse (gpuplan.rules.cascade)
REFUSES = {E_UNKNOWN_GPU.code: GPU, E_NOT_MIG.code: SHARING, E_SINGLE.code: SHARING, E_DEVICE_INDEX.code: SHARING,
           **{c.code: SHARING for c in FAILURE_CODES.values()}}


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

    from gpuplan.rules.operator import valid_driver_version

    driver = rf.fleet.spec.cluster.gpu_operator.driver_version
    if driver is not None and not valid_driver_version(driver):
        driver = None  # GP641 reports it at its line; check layouts as for an unknown driver
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
        code = FAILURE_CODES[f.kind]
        at = path
        if f.profile is not None and f.profile in layout:
            at = path + (f.profile,)
        hint_parts = []
        if f.did_you_mean:
            hint_parts.append(f"did you mean {f.did_you_mean[0]!r}?")
        if result.suggestions:
            # each one the spec's own YAML, pasteable over the `layout:` line
            shown = " | ".join("layout: {" + ", ".join(f"{p}: {n}" for p, n in s.layout) + "}"
                               for s in result.suggestions[:3])
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
