"""Node-level MIG rules: what a node's set of per-GPU layouts means under a MIG
strategy, and which extended resources it advertises.

Per-GPU geometry is `gpuplan.mig.solver.check_layout`; this module checks what
only the whole node can get wrong (reference/mig/rules.md §7):

- ``single``: every MIG device on the node is advertised as ``nvidia.com/gpu``,
  so the device plugin requires every GPU MIG-enabled, each with at least one
  MIG device, all of one identical profile; otherwise it errors ("more than one
  MIG device type present on node") and GFD labels the product ``-MIG-INVALID``.
- ``mixed``: one resource per profile, ``nvidia.com/mig-<profile>`` (``+`` ->
  ``.``); only profiles with C == G get a resource; MIG-disabled GPUs stay
  ``nvidia.com/gpu``.
- ``none``: MIG devices are not advertised at all.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Sequence

from gpuplan.catalog import STRATEGIES, GpuModel, gets_mixed_resource, mig_resource_name, resolve_gpu


class NodeProblemKind(str, Enum):
    NOT_MIG_CAPABLE = "not-mig-capable"  # a MIG layout on a GPU without MIG
    SINGLE_MIG_DISABLED = "single-mig-disabled"  # single: a GPU left without MIG
    SINGLE_EMPTY_GPU = "single-empty-gpu"  # single: a MIG GPU with no MIG device
    SINGLE_MIXED_PROFILES = "single-mixed-profiles"  # single: more than one profile on the node
    NO_MIXED_RESOURCE = "no-mixed-resource"  # mixed: a <c>c. profile gets no resource
    STRATEGY_NONE = "strategy-none"  # none: MIG devices are not advertised


@dataclass(frozen=True)
class NodeProblem:
    kind: NodeProblemKind
    message: str
    severity: str = "error"  # "error" | "warning"
    gpu_indices: tuple[int, ...] = ()
    profiles: tuple[str, ...] = ()


def _model(gpu: GpuModel | str) -> GpuModel:
    model = resolve_gpu(gpu)
    if model is None:
        raise KeyError(f"unknown GPU model {gpu!r}")
    return model


def _indices(idx: Sequence[int]) -> str:
    return ", ".join(str(i) for i in idx)


def check_node(
    gpu: GpuModel | str,
    per_gpu_layouts: Sequence[Mapping[str, int] | None],
    strategy: str,
) -> list[NodeProblem]:
    """Node-level problems of one node with ``len(per_gpu_layouts)`` GPUs of
    model ``gpu``. Each entry is that GPU's layout (profile -> count; ``{}`` =
    MIG enabled with no devices) or None (MIG disabled)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown MIG strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
    model = _model(gpu)
    layouts = [None if lay is None else {p: c for p, c in lay.items() if c > 0} for lay in per_gpu_layouts]
    mig_on = [i for i, lay in enumerate(layouts) if lay is not None]
    problems: list[NodeProblem] = []

    if mig_on and not model.mig_capable:
        return [
            NodeProblem(
                NodeProblemKind.NOT_MIG_CAPABLE,
                f"GPU {_indices(mig_on)} ({model.key}) does not support MIG "
                f"({model.architecture}, compute capability {model.compute_capability})",
                gpu_indices=tuple(mig_on),
            )
        ]
    if not mig_on:
        return problems

    if strategy == "none":
        problems.append(
            NodeProblem(
                NodeProblemKind.STRATEGY_NONE,
                "MIG strategy 'none' does not advertise MIG devices: pods cannot request them",
                severity="warning",
                gpu_indices=tuple(mig_on),
            )
        )
    elif strategy == "single":
        off = [i for i, lay in enumerate(layouts) if lay is None]
        if off:
            problems.append(
                NodeProblem(
                    NodeProblemKind.SINGLE_MIG_DISABLED,
                    f"strategy 'single' needs MIG on every GPU of the node; GPU {_indices(off)} "
                    "has MIG disabled (GFD then labels the node -MIG-INVALID)",
                    gpu_indices=tuple(off),
                )
            )
        empty = [i for i in mig_on if not layouts[i]]
        if empty:
            problems.append(
                NodeProblem(
                    NodeProblemKind.SINGLE_EMPTY_GPU,
                    f"strategy 'single' needs at least one MIG device on every MIG GPU; GPU "
                    f"{_indices(empty)} has none",
                    gpu_indices=tuple(empty),
                )
            )
        profiles = sorted({p for i in mig_on for p in (layouts[i] or {})})
        if len(profiles) > 1:
            problems.append(
                NodeProblem(
                    NodeProblemKind.SINGLE_MIXED_PROFILES,
                    f"strategy 'single' needs one identical MIG profile on every GPU of the node; "
                    f"found {', '.join(profiles)} (the device plugin refuses such a node: "
                    "\"more than one MIG device type present on node\")",
                    gpu_indices=tuple(mig_on),
                    profiles=tuple(profiles),
                )
            )
    else:  # mixed
        hidden = sorted({p for i in mig_on for p in (layouts[i] or {}) if not gets_mixed_resource(p)})
        if hidden:
            problems.append(
                NodeProblem(
                    NodeProblemKind.NO_MIXED_RESOURCE,
                    f"strategy 'mixed' advertises only profiles whose compute instance spans the "
                    f"GPU instance; {', '.join(hidden)} get no resource",
                    severity="warning",
                    profiles=tuple(hidden),
                )
            )
    return problems


def resources_for_layout(gpu: GpuModel | str, layout: Mapping[str, int] | None, strategy: str) -> dict[str, int]:
    """Extended resources one GPU with ``layout`` advertises (None = MIG off:
    one ``nvidia.com/gpu``). Keys sorted."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown MIG strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
    _model(gpu)
    if layout is None:
        return {"nvidia.com/gpu": 1}
    out: dict[str, int] = {}
    for profile, count in layout.items():
        if count <= 0:
            continue
        name = mig_resource_name(profile, strategy)
        if name is not None:
            out[name] = out.get(name, 0) + count
    return dict(sorted(out.items()))


def resources_for_node(
    gpu: GpuModel | str, per_gpu_layouts: Sequence[Mapping[str, int] | None], strategy: str
) -> dict[str, int]:
    """Sum of `resources_for_layout` over the node's GPUs."""
    out: dict[str, int] = {}
    for lay in per_gpu_layouts:
        for k, v in resources_for_layout(gpu, lay, strategy).items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))
