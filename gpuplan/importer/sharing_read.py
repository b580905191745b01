"""GPU sharing a cluster configures outside the GPU Operator's ConfigMaps, for a Karpenter pool.

* **Bottlerocket**: an EC2NodeClass of the Bottlerocket family (``amiSelectorTerms`` alias
  ``bottlerocket@...`` or ``spec.amiFamily: Bottlerocket``) runs Bottlerocket's own NVIDIA device
  plugin, configured by ``[settings.kubelet-device-plugins.nvidia]`` in its TOML userData
  (gpuplan writes the same keys, ``gpuplan.identity.bottlerocket_device_plugin``). The keys and the
  values they default to are Bottlerocket's: bottlerocket-os/bottlerocket
  sources/settings-migrations/v1.25.0/kubelet-device-plugins-time-slicing-settings/src/main.rs:8-11
  (the four settings), sources/shared-defaults/nvidia-k8s-device-plugin.toml:20-24
  (``device-sharing-strategy = "none"``), and bottlerocket-os/bottlerocket-core-kit
  packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin-conf:14-22 (only ``time-slicing``
  renders a ``sharing`` block: ``renameByDefault`` and ``failRequestsGreaterThanOne`` default to
  true, ``replicas`` to 2).
* **NodeOverlays**: a ``karpenter.sh/v1alpha1`` NodeOverlay applies to the instance types of every
  NodePool its requirements are compatible with: the NodePool's name, its template labels and the
  instance type's labels (kubernetes-sigs/karpenter@v1.14.1
  pkg/controllers/nodeoverlay/controller.go:233-249 ``getOverlaidOfferings``). Overlays are taken
  by weight, higher first, equal weights by name, later in the alphabet first
  (pkg/apis/v1alpha1/nodeoverlay.go:126-140); a resource an earlier overlay set keeps its value
  (pkg/controllers/nodeoverlay/store.go:176-209), an overlay of the same weight that sets one of
  the same resources conflicts and is applied nowhere (store.go:212-236, controller.go:163-174),
  and the capacity replaces the instance type's (pkg/cloudprovider/types.go:313-316,
  ``lo.Assign``: ``nvidia.com/gpu`` too). ``nvidia.com/gpu`` or ``nvidia.com/gpu.shared`` of C on an
  instance type of G GPUs says C / G replicas per GPU.
* **GPU limits**: Karpenter checks ``spec.limits`` against the sum of its nodes' capacity
  (pkg/apis/v1/nodepool.go:190-200 ``ExceededBy``; an initialized node counts its
  ``status.capacity``, pkg/controllers/state/statenode.go:359-374, subtracted from the remaining
  limit in pkg/controllers/provisioning/scheduling/scheduler.go:839-841), and launches only an
  instance type whose capacity fits what remains (scheduler.go:1069-1085). A time-sliced node
  advertises GPUs x replicas, so the limit is limit / (GPUs x replicas) nodes.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import Diagnostic, show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer.read import Obj

_INT = re.compile(r"[0-9]+\Z")
_ALIAS = re.compile(r"(al2023|bottlerocket)@(.+)\Z")
NVIDIA_SETTINGS = ("settings", "kubelet-device-plugins", "nvidia")
# the settings Bottlerocket's template reads, and what each is when unset (nvidia-k8s-device-plugin-conf:18-22)
TIME_SLICING_KEYS = {"replicas": ("replicas", 2), "rename-by-default": ("renameByDefault", True),
                     "fail-requests-greater-than-one": ("failRequestsGreaterThanOne", True)}
SHARED = V.GPU + V.SHARED_SUFFIX
OFFERING_KEYS = (V.KARPENTER_CAPACITY_TYPE, V.ZONE_LABEL, "topology.k8s.aws/zone-id")


def _diag(message: str, o: Obj, *sub: Any, hint: str | None = None) -> Diagnostic:
    f, line, col = o.at(*sub)
    return C.W_SHARING_UNREAD.diag(message, file=f, line=line, col=col, hint=hint)


def ami_family(nc: Obj) -> tuple[str | None, str | None]:
    """(AMI family as gpuplan's spec spells it, pinned version or None) of an EC2NodeClass."""
    terms = dig(nc.data, "spec", "amiSelectorTerms")
    alias = terms[0].get("alias") if isinstance(terms, list) and terms and isinstance(terms[0], dict) else None
    m = _ALIAS.match(alias) if isinstance(alias, str) else None
    if m:
        return ("AL2023" if m[1] == "al2023" else "Bottlerocket"), m[2]
    fam = dig(nc.data, "spec", "amiFamily")  # aws/karpenter-provider-aws@v1.14.1 pkg/apis/v1/ec2nodeclass.go:77-80
    return (fam if fam in ("AL2023", "Bottlerocket") else None), None


# --------------------------------------------------------------------------- Bottlerocket


def bottlerocket_sharing(name: str, nc: Obj, out: list[Diagnostic]) -> dict | None:
    """The sharing Bottlerocket's device plugin runs with on ``nc``'s nodes (None: whole GPUs)."""
    text = dig(nc.data, "spec", "userData")
    if not isinstance(text, str):
        return None
    try:
        toml = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        out.append(_diag(f"pool {name}: EC2NodeClass {nc.name} userData is not TOML ({show(str(exc))}); Bottlerocket "
                         "reads its settings only as TOML: the pool's GPU sharing is not read", nc, "spec", "userData",
                         hint="fix the userData, then import again"))
        return None
    nv = dig(toml, *NVIDIA_SETTINGS)
    if not isinstance(nv, dict):
        return None
    strategy = nv.get("device-sharing-strategy", "none")
    if strategy == "none":
        return None
    if strategy != "time-slicing":
        out.append(_diag(f"pool {name}: EC2NodeClass {nc.name} userData asks for device-sharing-strategy "
                         f"{show(strategy)}, which gpuplan cannot write (time-slicing, or none); left as whole GPUs",
                         nc, "spec", "userData"))
        return None
    ts = nv.get("time-slicing") if isinstance(nv.get("time-slicing"), dict) else {}
    sharing: dict[str, Any] = {"mode": "time-slicing"}
    for key, (spec_key, default) in TIME_SLICING_KEYS.items():
        v = ts.get(key, default)
        ok = isinstance(v, bool) if isinstance(default, bool) else isinstance(v, int) and not isinstance(v, bool) \
            and v >= 2
        if not ok:
            out.append(_diag(f"pool {name}: EC2NodeClass {nc.name} userData time-slicing {key} = {show(v)} is not one "
                             "gpuplan can write; left as whole GPUs", nc, "spec", "userData"))
            return None
        sharing[spec_key] = v
    return sharing


def settings_meaning(text: str) -> dict | None:
    """A Bottlerocket TOML userData with the device plugin's defaults filled in, so two texts that
    configure the same plugin compare equal (None: not TOML)."""
    try:
        toml = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    nv = dig(toml, *NVIDIA_SETTINGS)
    if isinstance(nv, dict):
        nv.setdefault("device-sharing-strategy", "none")
        if nv["device-sharing-strategy"] == "time-slicing" and isinstance(nv.setdefault("time-slicing", {}), dict):
            for key, (_, default) in TIME_SLICING_KEYS.items():
                nv["time-slicing"].setdefault(key, default)
    return toml


# --------------------------------------------------------------------------- NodeOverlays


@dataclass
class PoolOverlays:
    """What the NodeOverlays of the input give one NodePool's instance types."""

    capacity: dict[str, dict[str, Any]] = field(default_factory=dict)  # instance type -> resource -> quantity
    applied: list[Obj] = field(default_factory=list)  # overlays whose capacity applies, in upstream order
    price_only: list[Obj] = field(default_factory=list)  # overlays that change only prices
    todos: list[tuple[str, Obj]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.applied]


def _weight(o: Obj) -> int:
    w = dig(o.data, "spec", "weight")
    return w if isinstance(w, int) and not isinstance(w, bool) else 0


def _matches(reqs: dict, np_name: str, labels: dict, it_labels: dict) -> tuple[bool, list[str]]:
    """Is an overlay with parsed requirements ``reqs`` compatible with one instance type of a
    NodePool? (and the keys it could not judge)."""
    from gpuplan.cloud.aws import INSTANCE_LABEL_KEYS

    unread = []
    for key, r in reqs.items():
        if key == V.KARPENTER_NODEPOOL_LABEL:
            ok = r.fits(np_name)
        elif key in INSTANCE_LABEL_KEYS:
            ok = r.fits(it_labels.get(key))
        elif key in labels:
            ok = r.fits(labels[key])
        elif key in OFFERING_KEYS:
            continue  # one offering that fits applies the capacity to the whole instance type (controller.go:228-232)
        else:
            unread.append(key)
            ok = False
        if not ok:
            return False, unread
    return not unread, unread


def read_overlays(objs: list[Obj]) -> dict[str, PoolOverlays]:
    """NodePool name -> what the input's NodeOverlays give its instance types."""
    from gpuplan.cloud.aws import instance_labels, instance_type
    from gpuplan.cloud.karpenter_requirements import parse, select

    overlays = sorted(sorted((o for o in objs if o.kind == "NodeOverlay" and o.api_group == "karpenter.sh"),
                             key=lambda o: o.name, reverse=True), key=lambda o: -_weight(o))  # nodeoverlay.go:130-140
    pools: dict[str, tuple[dict, list[str]]] = {}
    for np_ in (o for o in objs if o.kind == "NodePool" and o.api_group == "karpenter.sh"):
        labels = dig(np_.data, "spec", "template", "metadata", "labels")
        labels = {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {}
        pools[np_.name] = (labels, select(dig(np_.data, "spec", "template", "spec", "requirements")).types)
    out = {name: PoolOverlays() for name in pools}
    # (NodePool, instance type) -> (lowest weight applied, the resources of that weight), as store.go keeps them
    lowest: dict[tuple[str, str], tuple[int, set[str]]] = {}
    for o in overlays:
        reqs, _ = parse(dig(o.data, "spec", "requirements"))
        cap = dig(o.data, "spec", "capacity")
        cap = cap if isinstance(cap, dict) and cap else None
        hits: list[tuple[str, str]] = []
        for np_name, (labels, types) in sorted(pools.items()):
            for t in types:
                ok, unread = _matches(reqs, np_name, labels, instance_labels(instance_type(t)))
                if unread:
                    out[np_name].todos.append((f"NodeOverlay {o.name} requires {', '.join(sorted(unread))}, not a "
                                               "label of the NodePool or its instance types: check where it applies",
                                               o))
                    break
                if ok:
                    hits.append((np_name, t))
        if cap is None:
            if dig(o.data, "spec", "price") is not None or dig(o.data, "spec", "priceAdjustment") is not None:
                for np_name in sorted({n for n, _ in hits}):
                    out[np_name].price_only.append(o)
            continue
        w = _weight(o)
        if any(lowest.get(h, (None, set()))[0] == w and set(cap) & lowest[h][1] for h in hits):
            for np_name in sorted({n for n, _ in hits}):
                out[np_name].todos.append((f"NodeOverlay {o.name} conflicts with another of weight {w} on the same "
                                           "resource: Karpenter applies it nowhere (store.go:212-236)", o))
            continue
        for h in hits:
            pc = out[h[0]].capacity.setdefault(h[1], {})
            for res, q in cap.items():
                pc.setdefault(res, q)  # an earlier (heavier) overlay's value stays (store.go:199-204)
            lowest[h] = (w, set(cap))
            if o not in out[h[0]].applied:
                out[h[0]].applied.append(o)
    return out


# --------------------------------------------------------------------------- the pool's sharing


def _advertised(sharing: dict, gpus: int) -> tuple[str, int]:
    """(GPU resource, count) a node of ``gpus`` GPUs advertises under ``sharing`` (not MIG)."""
    if sharing.get("mode") in ("time-slicing", "mps"):
        return (SHARED if sharing.get("renameByDefault", True) else V.GPU), gpus * sharing["replicas"]
    return V.GPU, gpus


def _overlay_sharing(name: str, np_: Obj, ov: PoolOverlays, types: list[str], gpus: dict[str, int],
                     out: list[Diagnostic]) -> tuple[tuple[str, int] | None, Obj | None]:
    """(resource, replicas per GPU) the overlays say for the pool's instance types (None: they
    say nothing of GPUs, or not one whole count)."""
    said: set[tuple[str, int]] = set()
    src = None
    for t in types:
        cap = ov.capacity.get(t) or {}
        for res in (V.GPU, SHARED):
            q = cap.get(res)
            if q is None:
                continue
            src = next((o for o in ov.applied if res in (dig(o.data, "spec", "capacity") or {})), None)
            g = gpus.get(t) or 0
            if not _INT.match(str(q)) or g == 0 or int(q) % g:
                out.append(_diag(f"pool {name}: NodeOverlay {src.name if src else '?'} gives {t} {res}: {q}, not a "
                                 f"whole multiple of its {g} GPUs: no replica count; sharing not read from it",
                                 src or np_, "spec", "capacity", res))
                return None, src
            said.add((res, int(q) // g))
    if len(said) > 1:
        out.append(_diag(f"pool {name}: NodeOverlays give its instance types different GPU counts per GPU "
                         f"({', '.join(f'{r} x{n}' for r, n in sorted(said))}); sharing not read from them",
                         src or np_, "spec", "capacity"))
        return None, src
    return (next(iter(said)) if said else None), src


@dataclass
class Sharing:
    sharing: dict
    sources: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    counted: bool = False  # an overlay tells Karpenter the count the nodes advertise


def pool_sharing(name: str, sharing: dict, configured: bool, np_: Obj, nc: Obj | None, types: list[str],
                 ov: PoolOverlays | None, out: list[Diagnostic]) -> Sharing:
    """The pool's sharing from Bottlerocket's settings and the NodeOverlays, over ``sharing`` (what
    the GPU Operator's configs say; ``configured``: a device-plugin config was selected)."""
    from gpuplan.cloud.aws import instance_type

    res = Sharing(dict(sharing))
    if nc is not None and ami_family(nc)[0] == "Bottlerocket":
        br = bottlerocket_sharing(name, nc, out)
        if br is not None:
            if configured and sharing.get("mode") not in ("exclusive", br["mode"]) or \
                    configured and sharing.get("mode") == br["mode"] and sharing != br:
                out.append(_diag(f"pool {name}: the device-plugin config its nodes select and EC2NodeClass {nc.name}'s "
                                 "Bottlerocket settings disagree; the draft takes Bottlerocket's (its plugin serves the "
                                 "node)", nc, "spec", "userData"))
            res.sharing = br
            res.sources.append(f"EC2NodeClass {nc.name} userData [settings.kubelet-device-plugins.nvidia]")
            configured = True
    if ov is None or not ov.capacity or res.sharing.get("mode") == "mig":
        return res
    gpus = {t: instance_type(t).gpu_count for t in types if instance_type(t) is not None}
    said, src = _overlay_sharing(name, np_, ov, [t for t in types if t in gpus], gpus, out)
    if said is None or src is None:
        return res
    resource, replicas = said
    res.counted = True
    if configured or res.sharing.get("mode") != "exclusive":
        g = min(gpus.values())
        have = _advertised(res.sharing, g)
        if have != (resource, replicas * g):
            out.append(_diag(f"pool {name}: NodeOverlay {src.name} gives {resource} {replicas * g} per {g}-GPU node; "
                             f"the device plugin's config advertises {have[0]} {have[1]}: Karpenter plans with the "
                             "overlay's count, the nodes advertise the config's", src, "spec", "capacity", resource,
                             hint="make the overlay's capacity GPUs x replicas of the config"))
        return res
    if replicas > 1:
        res.sharing = {"mode": "time-slicing", "replicas": replicas, "renameByDefault": resource == SHARED,
                       "failRequestsGreaterThanOne": False}
        res.sources.append(f"NodeOverlay {src.name} spec.capacity[{resource}] (no device-plugin config in the input)")
        res.todos.append("a NodeOverlay gives only the count: time-slicing or MPS, and failRequestsGreaterThanOne, "
                         "are what the nodes' device plugin runs with; check them")
    return res


def limit_nodes(limits: Any, sharing: dict, gpus: int, counted: bool) -> tuple[int, str, str | None] | None:
    """(nodes, the limit read, a TODO) of a NodePool whose ``spec.limits`` bounds a GPU resource
    rather than ``nodes`` (None: no such limit)."""
    if not isinstance(limits, dict) or gpus <= 0 or sharing.get("mode") == "mig":
        return None
    resource, per_node = _advertised(sharing, gpus)
    for key in (resource, V.GPU):
        v = limits.get(key)
        if not isinstance(v, (str, int)) or isinstance(v, bool) or not _INT.match(str(v)):
            continue
        if key != resource:  # nvidia.com/gpu on renamed nodes: they advertise none once initialized
            return (int(v) // gpus, f"spec.limits[{key}] / {gpus} GPUs per instance",
                    f"the nodes advertise {resource}, not {key}: once initialized they count none against this "
                    f"limit (statenode.go:359-374); limit {resource} or nodes instead")
        todo = None
        if int(v) % per_node:
            todo = f"spec.limits[{key}] {v} is not a whole number of nodes ({per_node} each): Karpenter stops below it"
        if per_node != gpus and not counted:
            todo = (f"{todo}; " if todo else "") + (
                f"no NodeOverlay gives the instance type's {per_node} {key}: within one scheduling pass Karpenter "
                f"counts its {gpus} GPUs, so up to {int(v) // gpus} nodes may launch before they initialize "
                "(scheduler.go:1069-1085)")
        why = f" x {per_node // gpus} replicas" if per_node != gpus else ""
        return int(v) // per_node, f"spec.limits[{key}] / ({gpus} GPUs per instance{why})", todo
    return None
