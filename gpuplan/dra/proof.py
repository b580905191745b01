"""Proof that every DRA selector gpuplan emits picks exactly its tier's devices.

For every DRA pool, the devices NVIDIA's DRA driver would publish
(``gpuplan.dra.slices``); for every DeviceClass — gpuplan's, one per DRA tier,
and the driver chart's own ``gpu.nvidia.com`` / ``mig.nvidia.com`` — its CEL
selector, evaluated with a real CEL engine (gpuplan's one engine,
``gpuplan.verify.cel``: the compiled ``common-expression-language``) against
every device.
Then, per tier:

- **satisfiable**: each of its ResourceClaimTemplates can be allocated on one
  node of its pool: ``count`` matching devices on that node, and, with the
  ``matchAttribute: gpu.nvidia.com/parentUUID`` constraint, on one GPU;
- **exclusive**: the selector matches no device of any other pool;
- **no errors**: evaluating the selector against any published device raises
  no CEL error (the scheduler fails an allocation on a selector error; it
  does not treat it as "no match").

Results are data; ``gpuplan.rules.dra`` turns them into diagnostics. DRA's CEL
environment (``device.driver``, ``device.attributes["<domain>"].<name>``,
``device.capacity["<domain>"].<name>``; kubernetes/api@v0.36.3
resource/v1/types.go, ``CELDeviceSelector``) is built here only as far as
gpuplan's selectors use it: strings, string lists and ``in``; no quantity or
semver functions are used, so none are provided (``gpuplan.verify.cel.expression``
refuses an expression that calls one, and the proof reports it).

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuplan.dra.claims import CHART_CLASSES, DRIVER, PARENT_UUID, TierClaim, dra_pools, tier_claims
from gpuplan.dra.slices import Device, pool_devices

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

CHART_SELECTORS: dict[str, str] = {
    # deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml L10,
    # deviceclass-mig.yaml L9, deviceclass-vfio-gpu.yaml L10 (commit 95932046)
    "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
}


class SelectorError(Exception):
    """A selector that does not compile or that fails on a device."""


def _program(expression: str) -> Any:
    from gpuplan.verify.cel import expression as compile_expression

    try:
        return compile_expression(expression)
    except ValueError as exc:
        raise SelectorError(f"CEL does not compile: {exc}") from exc


def _cel_device(d: Device) -> dict[str, Any]:
    """The ``device`` variable: plain JSON values, converted by the engine."""
    return {
        "driver": DRIVER,
        "attributes": d.attributes,
        "capacity": d.capacity,
        "allowMultipleAllocations": False,
    }


def matches(expression: str, device: Device, cel_device: Any = None) -> bool:
    """Evaluate one selector on one device (``cel_device``: its ``device``
    value, when already built); a CEL error raises SelectorError."""
    from gpuplan.verify.cel import run

    prog = _program(expression)
    try:
        result = run(prog, {"device": cel_device if cel_device is not None else _cel_device(device)})
    except Exception as exc:  # noqa: BLE001 - any evaluation error fails the allocation
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, KeyError):  # the engine's missing key or attribute
            text = f"no such key: {text}"
        raise SelectorError(f"fails on device {device.name} of pool {device.pool}: {text}") from exc
    if not isinstance(result, bool):
        raise SelectorError(f"returns {type(result).__name__}, not a bool, on device {device.name}")
    return result


@dataclass
class ClassResult:
    """One DeviceClass against every DRA pool's devices."""

    name: str
    selector: str
    matched: dict[str, list[Device]] = field(default_factory=dict)  # pool -> devices
    error: str | None = None


@dataclass
class TierProof:
    claim: TierClaim
    cls: ClassResult
    unsatisfied: list[tuple[int, str]] = field(default_factory=list)  # (count, why)
    elsewhere: dict[str, int] = field(default_factory=dict)  # other pool -> matching devices

    @property
    def ok(self) -> bool:
        return self.cls.error is None and not self.unsatisfied and not self.elsewhere


@dataclass
class Proof:
    tiers: list[TierProof]
    chart: dict[str, ClassResult]
    devices: dict[str, list[Device]]  # pool -> modelled devices


def evaluate_class(name: str, selector: str, devices: dict[str, list[Device]],
                   cel: dict[int, Any] | None = None) -> ClassResult:
    """``cel``: id(device) -> its CEL value, converted once for every class."""
    res = ClassResult(name, selector)
    cel = cel or {}
    try:
        for pool, devs in devices.items():
            hit = [d for d in devs if matches(selector, d, cel.get(id(d)))]
            if hit:
                res.matched[pool] = hit
    except SelectorError as exc:
        res.error = str(exc)
        res.matched = {}
    return res


def allocatable(devs: list[Device], count: int, constraint: str | None) -> bool:
    """Can ``count`` of these devices be allocated to one claim? All from one
    node (a node-local slice); with a matchAttribute constraint, all sharing
    that attribute's value (as the scheduler's allocator requires)."""
    by_node = Counter(d.node for d in devs)
    if constraint is None:
        return any(n >= count for n in by_node.values())
    groups = Counter((d.node, d.attr(constraint)) for d in devs if d.attr(constraint) is not None)
    return any(n >= count for n in groups.values())


def prove(rf: "ResolvedFleet") -> Proof:
    devices = {pv.name: pool_devices(pv) for pv in dra_pools(rf)}
    cel = {id(d): _cel_device(d) for devs in devices.values() for d in devs}
    chart = {name: evaluate_class(name, sel, devices, cel) for name, sel in CHART_SELECTORS.items()}
    out = []
    for claim in tier_claims(rf):
        cls = evaluate_class(claim.class_name, claim.selector, devices, cel)
        tp = TierProof(claim, cls)
        if cls.error is None:
            own = cls.matched.get(claim.pool, [])
            for count in claim.template_counts():
                constraint = PARENT_UUID if claim.needs_parent_constraint(count) else None
                if not allocatable(own, count, constraint):
                    where = "on one GPU" if constraint else "on one node"
                    tp.unsatisfied.append((count, f"{count} device(s) {where}: the pool's node publishes "
                                                  f"{len(own)} matching device(s)"))
            tp.elsewhere = {p: len(d) for p, d in cls.matched.items() if p != claim.pool}
        out.append(tp)
    return Proof(out, chart, devices)


def chart_extended_resources() -> dict[str, str]:
    """extendedResourceName -> the driver chart's DeviceClass that claims it."""
    return {res: name for name, res in CHART_CLASSES.items() if res is not None}
