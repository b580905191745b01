"""Which Kubernetes version has which feature: the one table rules consult.

Each entry says when a feature became alpha, beta and GA, the feature gate that
turns it on before GA, and where that comes from (KEP ``kep.yaml`` milestones in
kubernetes/enhancements, and the kubelet / API types at the named release).
Rules ask :func:`maturity` for the cluster's ``kubernetesVersion`` and report a
feature used before it exists, or one that needs a gate the node does not set.

Add a feature here (with its source) before a rule or a lowering target uses it.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Version = tuple[int, int]
Maturity = Literal["missing", "alpha", "beta", "ga"]


@dataclass(frozen=True)
class Feature:
    title: str
    alpha: Version | None
    beta: Version | None
    ga: Version | None
    gate: str | None  # the feature gate (or switch) that enables it before GA
    beta_on_by_default: bool
    source: str


FEATURES: dict[str, Feature] = {
    "kubelet-config-dir": Feature(
        "kubelet drop-in configuration directory (--config-dir)", (1, 28), (1, 31), (1, 35),
        "KUBELET_CONFIG_DROPIN_DIR_ALPHA environment variable of the kubelet (1.28-1.30 only)", True,
        "KEP-3983, kubernetes/enhancements keps/sig-node/3983-drop-in-configuration/kep.yaml",
    ),
    "topology-manager": Feature(
        "kubelet Topology Manager", (1, 16), (1, 18), (1, 27), "TopologyManager", True,
        "KEP-693, kubernetes/enhancements keps/sig-node/693-topology-manager/kep.yaml",
    ),
    "topology-manager-pod-scope": Feature(
        "Topology Manager scope pod", None, (1, 20), (1, 27), "TopologyManager", True,
        "KEP-693 (topologyManagerScope since 1.20: kubernetes/kubelet config/v1beta1/types.go)",
    ),
    "prefer-closest-numa-nodes": Feature(
        "Topology Manager policy option prefer-closest-numa-nodes", (1, 26), (1, 28), (1, 32),
        "TopologyManagerPolicyAlphaOptions (1.26-1.27), TopologyManagerPolicyBetaOptions (1.28-1.31)", True,
        "KEP-3545, kubernetes/enhancements keps/sig-node/3545-improved-multi-numa-alignment/kep.yaml",
    ),
    "cpu-manager": Feature(
        "kubelet CPU Manager (static policy)", (1, 8), (1, 10), (1, 26), "CPUManager", True,
        "KEP-3570, kubernetes/enhancements keps/sig-node/3570-cpumanager/kep.yaml",
    ),
    "memory-manager": Feature(
        "kubelet Memory Manager (Static policy)", (1, 21), (1, 22), (1, 32), "MemoryManager", True,
        "KEP-1769, kubernetes/enhancements keps/sig-node/1769-memory-manager/kep.yaml",
    ),
    # Not used by gpuplan today; listed for the features that will gate on them.
    "validating-admission-policy": Feature(
        "ValidatingAdmissionPolicy", (1, 26), (1, 28), (1, 30), "ValidatingAdmissionPolicy", False,
        "KEP-3488, kubernetes/enhancements keps/sig-api-machinery/3488-cel-admission-control/kep.yaml",
    ),
    "dynamic-resource-allocation": Feature(
        "Dynamic Resource Allocation (structured parameters)", (1, 30), (1, 32), (1, 34),
        "DynamicResourceAllocation", False,
        "KEP-4381, kubernetes/enhancements keps/sig-node/4381-dra-structured-parameters/kep.yaml",
    ),
}


def parse_version(text: str) -> Version:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def maturity(feature: str, version: Version | str) -> Maturity:
    v = parse_version(version) if isinstance(version, str) else version
    f = FEATURES[feature]
    if f.ga is not None and v >= f.ga:
        return "ga"
    if f.beta is not None and v >= f.beta:
        return "beta"
    if f.alpha is not None and v >= f.alpha:
        return "alpha"
    return "missing"


def needs_gate(feature: str, version: Version | str) -> bool:
    """True when the feature exists in ``version`` but is off unless its gate is set."""
    m = maturity(feature, version)
    return m == "alpha" or (m == "beta" and not FEATURES[feature].beta_on_by_default)


def first(feature: str, *, usable_without_gate: bool = True) -> Version | None:
    """The first version in which the feature works (without a gate, by default)."""
    f = FEATURES[feature]
    if not usable_without_gate:
        return f.alpha or f.beta or f.ga
    return f.beta if f.beta_on_by_default and f.beta else f.ga


def show(v: Version | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "no release yet"
