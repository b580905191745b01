"""An independent, deliberately naive oracle for MIG creatability.

Shares only the catalog data with `gpuplan.mig.solver`: it re-states the rules
of reference/mig/rules.md §1/§3 and decides placement by trying every
combination of distinct placements per profile (itertools), checking memory
slices as Python sets. Slow but obviously right; used by the property tests.
"""

from __future__ import annotations

import itertools
from typing import Mapping

from gpuplan.catalog import GpuModel


def creatable(gpu: GpuModel, layout: Mapping[str, int]) -> bool:
    if not gpu.mig_capable:
        return False
    wanted = {n: c for n, c in layout.items() if c > 0}
    profiles = {p.name: p for p in gpu.profiles}
    if any(n not in profiles for n in wanted):
        return False
    if any(c > profiles[n].max_instances for n, c in wanted.items()):
        return False
    if sum(wanted.values()) > gpu.max_instances:
        return False
    if sum(c for n, c in wanted.items() if profiles[n].media == "+me") > 1:
        return False
    if any(profiles[n].media == "+me.all" for n in wanted):
        holders = sum(c for n, c in wanted.items() if profiles[n].media == "+me.all")
        others = [n for n in wanted if profiles[n].media not in ("+me.all", "-me")]
        if holders > 1 or others:
            return False
    choices = []
    for name, count in sorted(wanted.items()):
        p = profiles[name]
        spans = [frozenset(range(s, s + z)) for s, z in p.placements]
        choices.append(list(itertools.combinations(spans, count)))
    for combo in itertools.product(*choices):
        used: set[int] = set()
        ok = True
        for group in combo:
            for span in group:
                if used & span:
                    ok = False
                    break
                used |= span
            if not ok:
                break
        if ok:
            return True
    return False


def all_count_vectors(gpu: GpuModel):
    """Every layout with counts up to each profile's limit + 1 whose memory-slice
    total is at most the GPU's + 1 (everything beyond is trivially infeasible)."""
    profs = list(gpu.profiles)

    def go(i, acc, mem):
        if i == len(profs):
            yield dict(acc)
            return
        p = profs[i]
        for c in range(0, p.max_instances + 2):
            if mem + c * p.memory_slices > gpu.memory_slices + 1:
                break
            if c:
                acc.append((p.name, c))
            yield from go(i + 1, acc, mem + c * p.memory_slices)
            if c:
                acc.pop()

    yield from go(0, [], 0)
