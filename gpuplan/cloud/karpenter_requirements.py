"""Which instance types a Karpenter NodePool can launch: its ``spec.template.spec.requirements``
evaluated, as Karpenter evaluates them, against every instance type of gpuplan's AWS table
(:func:`gpuplan.cloud.aws.instance_labels`), or on Azure (Node Auto Provisioning) every VM size of
its AKS table (:func:`gpuplan.cloud.aks.vm_labels`): the same core code, the provider's labels.

Upstream (kubernetes-sigs/karpenter@v1.14.1):

* one requirement: ``pkg/scheduling/requirement.go:48-110`` ``NewRequirementWithFlexibility``
  (beta keys normalised first, :49-51 with ``pkg/apis/v1/labels.go:121-127``; ``In`` is a set,
  ``NotIn``/``Exists`` its complement, ``DoesNotExist`` the empty set, ``Gt N`` a lower bound
  ``N+1`` and ``Lt N`` an upper bound ``N-1`` on a complement; ``Gte``/``Lte`` as given);
* several on one key are intersected (``pkg/scheduling/requirements.go:133-140`` ``Add``,
  ``requirement.go:181-214`` ``Intersection``);
* an instance type fits when every key both define intersects
  (``pkg/controllers/provisioning/scheduling/nodeclaim.go:621`` calls ``requirements.go:254-274``
  ``Intersects``; ``requirement.go:220-254`` ``HasIntersection``, ``:334-350`` ``withinBounds``: a
  bound never admits a value that is not an integer). A key the instance type leaves unset
  (``DoesNotExist``, e.g. ``instance-local-nvme`` without local NVMe) fits only ``NotIn`` and
  ``DoesNotExist``; a key it does not define at all (a custom label) constrains nothing;
* ``minValues``: the types must carry at least that many distinct values of the key, else no
  node launches (``pkg/cloudprovider/types.go:399-432`` ``SatisfiesMinValues``).

Offering keys (capacity type, zone, region, reservation, tenancy) select offerings, not instance
types, and are left to the caller. Keys Karpenter sets that gpuplan's table does not hold
(``instance-hypervisor``, ``instance-cpu-manufacturer``, ...) are reported as ``unread``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.cloud.aws import INSTANCE_LABEL_KEYS, UNREAD_INSTANCE_KEYS, instance_labels, instance_types

# pkg/apis/v1/labels.go:121-127 NormalizedLabels (k8s.io/api core/v1 well_known_labels.go names)
NORMALIZED = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
              "beta.kubernetes.io/arch": "kubernetes.io/arch", "beta.kubernetes.io/os": "kubernetes.io/os",
              "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
              "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")


@dataclass(frozen=True)
class Requirement:
    """Karpenter's ``Requirement``: ``values`` (or, ``complement``, every value but them) within
    the inclusive bounds ``gte``/``lte``."""

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    gte: int | None = None
    lte: int | None = None
    min_values: int | None = None

    @property
    def operator(self) -> str:  # requirement.go:290-301 Operator
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def has(self, value: str) -> bool:  # requirement.go:275-280 Has
        return (value not in self.values if self.complement else value in self.values) \
            and _within(value, self.gte, self.lte)

    def fits(self, value: str | None) -> bool:
        """Does an instance type whose label is ``value`` (None: DoesNotExist) fit?"""
        if value is not None:  # the instance type's requirement is In [value]
            return self.has(value)
        return self.operator in ("NotIn", "DoesNotExist")  # requirements.go:258-264

    def intersection(self, other: "Requirement") -> "Requirement":  # requirement.go:181-214
        complement = self.complement and other.complement
        gte = _max(self.gte, other.gte)
        lte = _min(self.lte, other.lte)
        mv = _max(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset(), min_values=mv)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if _within(v, gte, lte))
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte, mv)


def _within(value: str, gte: int | None, lte: int | None) -> bool:  # requirement.go:334-350
    if gte is None and lte is None:
        return True
    try:
        v = int(value, 10)
    except ValueError:
        return False
    return (gte is None or v >= gte) and (lte is None or v <= lte)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def requirement(raw: Any) -> Requirement | None:
    """One ``NodeSelectorRequirementWithMinValues`` (None: not one Karpenter admits)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("key"), str) or raw.get("operator") not in OPERATORS:
        return None
    key, op = NORMALIZED.get(raw["key"], raw["key"]), raw["operator"]
    values = raw.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    mv = raw.get("minValues")
    mv = mv if isinstance(mv, int) and not isinstance(mv, bool) else None
    if op == "In":
        return Requirement(key, False, frozenset(values), min_values=mv)
    if op in ("NotIn", "Exists"):
        return Requirement(key, True, frozenset(values) if op == "NotIn" else frozenset(), min_values=mv)
    if op == "DoesNotExist":
        return Requirement(key, False, min_values=mv)
    if len(values) != 1 or not values[0].isdigit():  # nodepool.go:228: one non-negative integer
        return None
    n = int(values[0])
    bound = {"Gt": (n + 1, None), "Gte": (n, None), "Lt": (None, n - 1), "Lte": (None, n)}[op]
    return Requirement(key, True, frozenset(), bound[0], bound[1], mv)


@dataclass
class Selection:
    types: list[str] = field(default_factory=list)  # instance types of gpuplan's table that fit, sorted
    unread: list[str] = field(default_factory=list)  # keys Karpenter sets that the table does not hold
    unknown_values: dict[str, list[str]] = field(default_factory=dict)  # In values no table type carries
    unmet_min_values: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (minValues, distinct)
    invalid: list[Any] = field(default_factory=list)  # requirements Karpenter would refuse

    @property
    def exact(self) -> bool:
        """The set is the one Karpenter launches from (among GPU instance types)."""
        return not (self.unread or self.unknown_values or self.invalid)


def parse(raws: Any) -> tuple[dict[str, Requirement], list[Any]]:
    reqs: dict[str, Requirement] = {}
    bad = []
    for raw in raws if isinstance(raws, list) else ():
        r = requirement(raw)
        if r is None:
            bad.append(raw)
            continue
        reqs[r.key] = r.intersection(reqs[r.key]) if r.key in reqs else r  # requirements.go:133-140
    return reqs, bad


def _table(cloud: str) -> tuple[dict[str, dict[str, str | None]], frozenset, frozenset, tuple[str, ...]]:
    """(labels of every instance type, the keys they hold, the provider's keys they do not, the
    keys whose unknown ``In`` values are reported) of one cloud's table."""
    if cloud == "azure":
        from gpuplan.cloud.aks import UNREAD_VM_KEYS, VM_LABEL_KEYS, machine_types, vm_labels

        return ({n: vm_labels(n) for n in machine_types()}, VM_LABEL_KEYS, UNREAD_VM_KEYS,
                ("node.kubernetes.io/instance-type", "karpenter.azure.com/sku-name", "karpenter.azure.com/sku-series"))
    return ({name: instance_labels(it) for name, it in instance_types().items()}, INSTANCE_LABEL_KEYS,
            UNREAD_INSTANCE_KEYS, ("node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family",
                                   "karpenter.k8s.aws/instance-category"))


def instance_keys(cloud: str = "aws") -> frozenset[str]:
    """Every label key ``cloud``'s provider sets from an instance type (held by the table or not)."""
    if cloud == "azure":
        from gpuplan.cloud.aks import UNREAD_VM_KEYS, VM_LABEL_KEYS

        return VM_LABEL_KEYS | UNREAD_VM_KEYS
    return INSTANCE_LABEL_KEYS | UNREAD_INSTANCE_KEYS


def select(raws: Any, cloud: str = "aws") -> Selection:
    """The instance types of gpuplan's table of ``cloud`` (``aws``, ``azure``) the requirements
    ``raws`` admit."""
    reqs, bad = parse(raws)
    out = Selection(invalid=bad)
    labels, label_keys, unread, reported = _table(cloud)
    keys = [k for k in reqs if k in label_keys]
    out.unread = sorted(k for k in reqs if k in unread)
    out.types = sorted(n for n, lb in labels.items() if all(reqs[k].fits(lb.get(k)) for k in keys))
    for k in keys:
        r = reqs[k]
        if r.operator == "In" and k in reported:
            seen = {lb.get(k) for lb in labels.values()}
            missing = sorted(v for v in r.values if v not in seen)
            if missing:
                out.unknown_values[k] = missing
    for k, r in reqs.items():
        if r.min_values is not None and k in label_keys:
            distinct = {labels[n].get(k) for n in out.types} - {None}
            if len(distinct) < r.min_values:
                out.unmet_min_values[k] = (r.min_values, len(distinct))
    return out
