"""Slice diagrams of a placement: one row of compute (SM) slices, one of memory
slices, each instance a labelled box. Plain ASCII, at most 80 columns.

NVML reports only memory-slice placements. The compute row draws an instance's
SM slices from its memory start (``[start, start + compute)``), the convention
of NVIDIA's MIG partitioning diagrams; it shows the slices a layout strands
(e.g. the 7th SM slice between two 3g instances) but is illustrative only.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from string import ascii_uppercase
from typing import Sequence

from gpuplan.catalog import GpuModel, resolve_gpu
from gpuplan.mig.solver import Placement

WIDTH = 80
_LABEL_W = 8  # "compute " / "memory  "


@dataclass(frozen=True)
class Box:
    row: str  # "compute" | "memory"
    start: int  # first slice
    size: int  # slices
    label: str  # "A"
    profile: str  # "3g.40gb"
    instance: int  # index into the placements, 0-based


@dataclass(frozen=True)
class Diagram:
    gpu: str
    compute_slices: int
    memory_slices: int
    boxes: tuple[Box, ...]
    text: str

    def as_dict(self) -> dict:
        return {
            "gpu": self.gpu,
            "compute_slices": self.compute_slices,
            "memory_slices": self.memory_slices,
            "boxes": [b.__dict__ for b in self.boxes],
        }


def _label(i: int) -> str:
    return ascii_uppercase[i] if i < 26 else f"{ascii_uppercase[i // 26 - 1]}{ascii_uppercase[i % 26]}"


def _row(name: str, cells: int, cell_w: int, boxes: Sequence[Box], exists: int) -> str:
    out = [" " * cell_w] * cells
    for i in range(exists):
        out[i] = ".".center(cell_w)
    line = "".join(out)
    for b in boxes:
        w = b.size * cell_w
        inner = w - 2
        text = f"{b.label} {b.profile}"
        if len(text) > inner:
            text = b.label
        box = "[" + text.center(inner) + "]"
        a = b.start * cell_w
        line = line[:a] + box + line[a + w :]
    return f"{name:<{_LABEL_W}}{line}".rstrip()


def render_diagram(gpu: GpuModel | str, placements: Sequence[Placement]) -> Diagram:
    """The diagram of ``placements`` (from a creatable `LayoutCheck`) on ``gpu``."""
    model = resolve_gpu(gpu)
    if model is None:
        raise KeyError(f"unknown GPU model {gpu!r}")
    cells = max(model.memory_slices, model.compute_slices, 1)
    cell_w = min(18, (WIDTH - _LABEL_W) // cells)
    ordered = sorted(placements, key=lambda p: (p.start, p.profile))
    boxes: list[Box] = []
    for i, p in enumerate(ordered):
        lab = _label(i)
        boxes.append(Box("compute", p.start, p.compute_slices, lab, p.profile, i))
        boxes.append(Box("memory", p.start, p.size, lab, p.profile, i))
    header = " " * _LABEL_W + "".join(str(i).center(cell_w) for i in range(cells))
    lines = [
        f"{model.key}: {model.compute_slices} compute slices, {model.memory_slices} memory slices "
        "('.' = free)",
        header.rstrip(),
        _row("compute", cells, cell_w, [b for b in boxes if b.row == "compute"], model.compute_slices),
        _row("memory", cells, cell_w, [b for b in boxes if b.row == "memory"], model.memory_slices),
    ]
    for i, p in enumerate(ordered):
        lines.append(
            f"  {_label(i)}  {p.profile:<16} memory slices {p.slices:<5} compute slices "
            f"{p.compute_slices}"
        )
    return Diagram(model.key, model.compute_slices, model.memory_slices, tuple(boxes), "\n".join(lines))
