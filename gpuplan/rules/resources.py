"""GP401-GP409: every tier hands out a resource its pool really advertises.

A quota in fleet.yaml is "units of a tier"; the tier decides the extended
resource (`resolve.ResolvedFleet.tier_resource`): ``nvidia.com/gpu`` for whole
GPUs and the ``single`` MIG strategy, ``nvidia.com/gpu.shared`` for renamed
time-slicing/MPS replicas, ``nvidia.com/mig-<profile>`` (``+`` -> ``.``) under
``mixed``. These rules check that the device plugin will publish that
resource on the pool's nodes, and that a ResourceQuota can tell the tier apart
from other tiers (it counts a resource name, not a pool).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet
from gpuplan.rules.cascade import POOL_INPUTS
from gpuplan.spec.models import Mig

E_NO_PROFILE = Code(
    "GP401", "MIG tier without a profile", Severity.ERROR,
    "A tier on a pool with MIG strategy `mixed` must say which MIG profile it hands out: each "
    "profile is its own resource (`nvidia.com/mig-<profile>`). A tier without a profile hands out "
    "`nvidia.com/gpu`, which such a pool advertises only for GPUs its `devices` groups leave "
    "MIG-disabled: there it is allowed, on a pool with MIG on every GPU it is this error.",
    bad="tiers:\n  - {name: inference, pool: infer-a100}   # pool is mig/mixed",
    good="tiers:\n  - {name: inference, pool: infer-a100, profile: 1g.10gb}",
    pain="#22 kubeflow/website PR #2460 (quota keys that count nothing)",
)
E_PROFILE_NOT_IN_LAYOUT = Code(
    "GP402", "tier profile is not in the pool's MIG layout", Severity.ERROR,
    "The tier's profile is not created on any GPU of its pool, so its resource is never "
    "advertised: pods stay Pending and the quota counts nothing.",
    bad="pools:\n  - name: infer-a100\n    sharing: {mode: mig, layout: {3g.40gb: 2}}\n"
        "tiers:\n  - {name: small, pool: infer-a100, profile: 1g.10gb}",
    good="pools:\n  - name: infer-a100\n    sharing: {mode: mig, layout: {3g.40gb: 1, 1g.10gb: 4}}\n"
         "tiers:\n  - {name: small, pool: infer-a100, profile: 1g.10gb}",
    pain="#22 otwld/ollama-helm #93 (nvidia.com/mig-1g.10gb quota ineffective)",
)
E_SINGLE_PROFILE = Code(
    "GP403", "tier profile differs from the single-strategy profile", Severity.ERROR,
    "Under MIG strategy `single` every MIG device is advertised as `nvidia.com/gpu`; the only "
    "profile a tier on that pool can get is the pool's one profile.",
    bad="pools:\n  - name: p\n    sharing: {mode: mig, strategy: single, layout: {1g.10gb: 7}}\n"
        "tiers:\n  - {name: t, pool: p, profile: 3g.40gb}",
    good="tiers:\n  - {name: t, pool: p, profile: 1g.10gb}   # or leave profile out",
    pain="#10 NVIDIA/gpu-operator #460 (single strategy with mixed devices)",
)
E_PROFILE_NOT_MIG = Code(
    "GP404", "profile on a tier of a non-MIG pool", Severity.ERROR,
    "Only tiers on MIG pools hand out MIG profiles; on an exclusive, time-sliced or MPS pool the "
    "tier gets whole GPUs or replicas, and a `profile` there means the tier points at the wrong pool.",
    bad="tiers:\n  - {name: small, pool: dev-a100, profile: 1g.10gb}   # dev-a100 is time-sliced",
    good="tiers:\n  - {name: small, pool: infer-a100, profile: 1g.10gb}",
    pain="#22 kubeflow/website PR #2460",
)
W_SAME_RESOURCE = Code(
    "GP405", "tiers on different pools hand out the same resource: their quotas are scoped to their classes",
    Severity.INFO,
    "A ResourceQuota counts a resource name, not a pool: tiers on different pools that advertise "
    "the same name (two exclusive pools, or an exclusive pool and a time-sliced pool that is not "
    "renamed) would be counted together, so a namespace's units of one tier could be spent on the "
    "other pool's GPUs. gpuplan therefore scopes each such tier's quota to its PriorityClass "
    "(`gpuplan-tier-<tier>`, as `enforcePriority: true` does), and the admission policy binds the "
    "class to its pool. Set `enforcePriority: true` on both tiers to say so in the spec (and silence "
    "this note), or rename the shared resource so the two pools' units are told apart everywhere.",
    bad="tiers:\n  - {name: training, pool: train-a100}\n  - {name: burst, pool: burst-h100}",
    good="tiers:\n  - {name: training, pool: train-a100, enforcePriority: true}\n"
         "  - {name: burst, pool: burst-h100, priority: 50000, enforcePriority: true}",
    pain="#16 NVIDIA/k8s-device-plugin #1121 (per-product quota impossible); #22",
)
E_NOT_ADVERTISED = Code(
    "GP406", "tier resource is not advertised", Severity.ERROR,
    "The resource the tier hands out is not published by any node of its pool: a compute-instance "
    "profile (`1c.2g.20gb`) gets no resource under `mixed` (only profiles whose compute instance "
    "spans the GPU instance do), and a pool with no GPUs advertises nothing.",
    bad="tiers:\n  - {name: t, pool: infer-a100, profile: 1c.2g.20gb}",
    good="tiers:\n  - {name: t, pool: infer-a100, profile: 2g.20gb}",
    pain="#22 kubeflow/website PR #2460",
)

CODES = (E_NO_PROFILE, E_PROFILE_NOT_IN_LAYOUT, E_SINGLE_PROFILE, E_PROFILE_NOT_MIG, W_SAME_RESOURCE,
         E_NOT_ADVERTISED)

# a tier's resource is read from its pool's layout and GPU model (gpuplan.rules.cascade)
CONSUMES = {c.code: POOL_INPUTS for c in (E_NO_PROFILE, E_PROFILE_NOT_IN_LAYOUT, E_SINGLE_PROFILE, W_SAME_RESOURCE,
                                          E_NOT_ADVERTISED)}


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _tier_profiles(rf)
    yield from _same_resource(rf)


def _tier_profiles(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.catalog import gets_mixed_resource
    from gpuplan.units import pool_resources_per_node

    for i, t in enumerate(rf.fleet.spec.tiers):
        pv = rf.tier_pool(t)
        if pv is None:
            continue  # GP107
        path = ("spec", "tiers", i)
        s = pv.pool.sharing
        if not isinstance(s, Mig):
            if t.profile is not None:
                yield rf.diag(E_PROFILE_NOT_MIG,
                              f"tier {t.name!r} sets profile {t.profile!r}, but pool {pv.name!r} shares its GPUs "
                              f"by {s.mode}, not MIG",
                              path + ("profile",),
                              hint="point the tier at a MIG pool, or remove `profile`")
            continue
        profiles = sorted({p for lay in pv.gpu_layouts() if lay for p in lay})
        # a profile the GPU model does not have is GP201's; never offer it back as a choice
        known = [p for p in profiles if pv.gpu is None or pv.gpu.profile(p) is not None]
        shown = ", ".join(known) or "none"
        if s.strategy == "single":
            if t.profile is not None and t.profile not in profiles:
                yield rf.diag(E_SINGLE_PROFILE,
                              f"tier {t.name!r} asks for {t.profile}, but pool {pv.name!r} uses strategy single "
                              f"with {shown}, advertised as nvidia.com/gpu",
                              path + ("profile",),
                              hint=f"use profile {known[0]}" if len(known) == 1 else
                              "use strategy mixed to offer several profiles")
            continue
        if t.profile is None:
            if any(lay is None for lay in pv.gpu_layouts()):
                continue  # the pool's MIG-disabled GPUs: the tier hands out nvidia.com/gpu
            offered = [p for p in known if gets_mixed_resource(p)]
            yield rf.diag(E_NO_PROFILE,
                          f"tier {t.name!r} is on MIG pool {pv.name!r} (strategy mixed) but names no profile",
                          path + ("name",),
                          hint=("add `profile:` with one of " + ", ".join(offered)) if offered else
                          "add `profile:` naming a profile of the pool's layout")
            continue
        if t.profile not in profiles:
            if not known:
                continue  # every profile of the layout is unknown to the GPU model: GP201 says so
            yield rf.diag(E_PROFILE_NOT_IN_LAYOUT,
                          f"tier {t.name!r} hands out {t.profile}, but pool {pv.name!r} creates only {shown}: "
                          f"nvidia.com/mig-{t.profile.replace('+', '.')} is never advertised",
                          path + ("profile",),
                          hint=f"add {t.profile} to the pool's layout (or run `gpuplan plan --optimise`), "
                               f"or use one of {shown}")
            continue
        res = rf.tier_resource(t)
        if not gets_mixed_resource(t.profile) or (pv.gpu is not None and res not in pool_resources_per_node(pv)):
            yield rf.diag(E_NOT_ADVERTISED,
                          f"tier {t.name!r} hands out {t.profile}, which strategy mixed does not advertise "
                          f"(only profiles whose compute instance spans the GPU instance get a resource)",
                          path + ("profile",),
                          hint="use the GPU-instance profile (e.g. 2g.20gb instead of 1c.2g.20gb)")


def _same_resource(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """Tiers on *different* pools that hand out the same resource name."""
    seen: dict[str, tuple[int, str, str]] = {}  # resource -> (tier index, tier, pool) of the first
    for i, t in enumerate(rf.fleet.spec.tiers):
        pv = rf.tier_pool(t)
        res = rf.tier_resource(t)
        if pv is None or res is None:
            continue
        first = seen.get(res)
        if first is None:
            seen[res] = (i, t.name, pv.name)
            continue
        fi, fname, fpool = first
        if fpool == pv.name:
            continue  # same pool: counting them together is the intent
        other = rf.fleet.spec.tiers[fi]
        if t.enforce_priority and other.enforce_priority:
            continue  # the spec scopes each quota to its own PriorityClass
        yield rf.diag(W_SAME_RESOURCE,
                      f"tiers {fname!r} (pool {fpool}) and {t.name!r} (pool {pv.name}) both hand out {res}, which "
                      f"a ResourceQuota counts whatever the pool: each tier's quota is scoped to its PriorityClass "
                      f"(ResourceQuotas gpuplan-tier-{fname} and gpuplan-tier-{t.name})",
                      ("spec", "tiers", i, "pool"),
                      hint="set `enforcePriority: true` on both tiers to say so in the spec"
                           + (", or set renameByDefault: true on the shared pool" if res == "nvidia.com/gpu"
                              and any(p.pool.sharing.mode in ("time-slicing", "mps") for p in (pv, rf.pool_by_name[fpool]))
                              else ""))
