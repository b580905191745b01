"""GP301-GP309: GPU sharing through the device plugin (time-slicing, MPS).

What the NVIDIA device plugin (v0.20.0) accepts and does, from
reference/k8s/facts.md §d: ``replicas`` must be at least 2 (a config with 1
crashes the plugin and GFD); MPS allows at most 48 replicas per GPU (16 on
GPUs with compute capability below 7.5) and does not work on MIG devices;
``renameByDefault`` publishes ``<name>.shared``; ``failRequestsGreaterThanOne``
rejects pods asking for more than one replica.

Not here: MPS together with MIG cannot be written in fleet.yaml (a pool has one
``sharing.mode``), and MIG on a GPU without MIG is GP206 (gpuplan.rules.mig).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet
from gpuplan.rules.cascade import POOL_INPUTS, SHARING

MPS_MAX_REPLICAS = 48
MPS_MAX_REPLICAS_OLD = 16  # compute capability < 7.5 (cmd/mps-control-daemon/mps/device.go)
PRODUCTION_MAX_REPLICAS = 4

E_REPLICAS_MIN = Code(
    "GP301", "sharing needs at least 2 replicas", Severity.ERROR,
    "Time-slicing and MPS split each GPU into `replicas` units; the device plugin rejects "
    "`replicas: 1` (and GFD crashes on it). To stop sharing a pool, use `mode: exclusive`.",
    bad="sharing: {mode: time-slicing, replicas: 1}",
    good="sharing: {mode: exclusive}   # or replicas: 2 and more",
    pain="#13 NVIDIA/k8s-device-plugin #1022; #14 NVIDIA/k8s-device-plugin #1548",
)
E_MPS_MAX = Code(
    "GP302", "too many MPS replicas", Severity.ERROR,
    "The MPS control daemon supports at most 48 clients per GPU (16 on GPUs with compute "
    "capability below 7.5, e.g. V100); more replicas fail when the daemon starts.",
    bad="sharing: {mode: mps, replicas: 64}",
    good="sharing: {mode: mps, replicas: 8}",
    pain="#14 NVIDIA/k8s-device-plugin #1548 (MPS config errors crash the plugin)",
)
W_NOT_RENAMED = Code(
    "GP303", "shared GPUs advertised as nvidia.com/gpu", Severity.WARNING,
    "With `renameByDefault: false` a time-sliced or MPS replica is published as `nvidia.com/gpu`, "
    "exactly like a whole GPU: quotas, schedulers and autoscalers cannot tell a replica from a "
    "GPU, and GFD only appends `-SHARED` to the `nvidia.com/gpu.product` label. Renaming publishes "
    "`nvidia.com/gpu.shared`.",
    bad="sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}",
    good="sharing: {mode: time-slicing, replicas: 4}   # renameByDefault: true",
    pain="#16 NVIDIA/k8s-device-plugin #353 (per-product names for quotas impossible); #19",
)
W_MULTI_REPLICA = Code(
    "GP304", "pods may get several replicas of one GPU", Severity.WARNING,
    "With `failRequestsGreaterThanOne: false` a pod asking for 2 replicas is admitted and may get "
    "two slices of the same physical GPU: it believes it has two GPUs and gets the time (or memory) "
    "of one. With `true` such a request fails at admission, which is what the device plugin "
    "README recommends.",
    bad="sharing: {mode: time-slicing, replicas: 4, failRequestsGreaterThanOne: false}",
    good="sharing: {mode: time-slicing, replicas: 4}   # failRequestsGreaterThanOne: true",
    pain="#25 NVIDIA/gpu-operator #386 (2 time-sliced replicas land on the same GPU)",
)
W_PRODUCTION_SHARED = Code(
    "GP305", "production tier on heavily shared GPUs", Severity.WARNING,
    f"Time-slicing gives no memory or fault isolation and MPS only partial; with more than "
    f"{PRODUCTION_MAX_REPLICAS} replicas per GPU an inference tier's latency depends on its "
    f"neighbours, and a training tier shares memory with them. Use MIG for isolated inference, "
    f"whole GPUs for training.",
    bad="pools:\n  - {name: shared, sharing: {mode: time-slicing, replicas: 8}, ...}\n"
        "tiers:\n  - {name: serving, pool: shared, workload: inference}",
    good="tiers:\n  - {name: serving, pool: infer-a100, profile: 1g.10gb, workload: inference}",
    pain="#25 NVIDIA/gpu-operator #386 (shared replicas land on the same GPU)",
)

CODES = (E_REPLICAS_MIN, E_MPS_MAX, W_NOT_RENAMED, W_MULTI_REPLICA, W_PRODUCTION_SHARED)

# what these rules refuse and read of a pool (gpuplan.rules.cascade)
REFUSES = {E_REPLICAS_MIN.code: SHARING, E_MPS_MAX.code: SHARING}
CONSUMES = {W_PRODUCTION_SHARED.code: POOL_INPUTS}


def _compute_capability(gpu) -> tuple[int, int] | None:
    try:
        major, minor = (gpu.compute_capability or "").split(".")
        return int(major), int(minor)
    except (AttributeError, ValueError):
        return None


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    for pv in rf.pools:
        s = pv.pool.sharing
        if s.mode not in ("time-slicing", "mps"):
            continue
        yield from _pool(rf, pv, s)
    yield from _production_tiers(rf)


def _pool(rf: ResolvedFleet, pv, s) -> Iterator[Diagnostic]:
    path = pv.path + ("sharing",)
    if s.replicas < 2:
        yield rf.diag(E_REPLICAS_MIN,
                      f"pool {pv.name!r}: {s.mode} with replicas {s.replicas}; the device plugin needs at least 2",
                      path + ("replicas",),
                      hint="to stop sharing this pool use `sharing: {mode: exclusive}`")
    if s.mode == "mps":
        limit, why = MPS_MAX_REPLICAS, ""
        cc = _compute_capability(pv.gpu) if pv.gpu is not None else None
        if cc is not None and cc < (7, 5):
            limit, why = MPS_MAX_REPLICAS_OLD, f" on {pv.gpu.key} (compute capability {pv.gpu.compute_capability} < 7.5)"
        if s.replicas > limit:
            yield rf.diag(E_MPS_MAX,
                          f"pool {pv.name!r}: MPS with {s.replicas} replicas; at most {limit} are supported{why}",
                          path + ("replicas",), hint=f"use at most {limit} replicas")
    if not s.rename_by_default:
        yield rf.diag(W_NOT_RENAMED,
                      f"pool {pv.name!r}: {s.mode} replicas are advertised as nvidia.com/gpu, indistinguishable "
                      f"from whole GPUs to quotas and schedulers",
                      path + ("renameByDefault",),
                      hint="set renameByDefault: true to advertise nvidia.com/gpu.shared")
    if not s.fail_requests_greater_than_one:
        yield rf.diag(W_MULTI_REPLICA,
                      f"pool {pv.name!r}: a pod asking for 2 {s.mode} replicas may get two slices of one "
                      f"physical GPU",
                      path + ("failRequestsGreaterThanOne",),
                      hint="set failRequestsGreaterThanOne: true (requests above 1 then fail at admission)")


def _production_tiers(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    for i, t in enumerate(rf.fleet.spec.tiers):
        if t.workload not in ("inference", "training"):
            continue
        pv = rf.tier_pool(t)
        if pv is None:
            continue
        s = pv.pool.sharing
        if s.mode not in ("time-slicing", "mps") or s.replicas <= PRODUCTION_MAX_REPLICAS:
            continue
        yield rf.diag(W_PRODUCTION_SHARED,
                      f"{t.workload} tier {t.name!r} runs on pool {pv.name!r}, {s.mode} with {s.replicas} replicas "
                      f"per GPU (more than {PRODUCTION_MAX_REPLICAS}): no isolation between neighbours",
                      ("spec", "tiers", i, "pool"),
                      hint="serve from a MIG pool (isolated slices) or lower the pool's replicas to "
                           f"{PRODUCTION_MAX_REPLICAS} or fewer")
