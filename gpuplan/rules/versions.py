"""GP630-GP631: every feature a pool uses exists in the cluster's ``kubernetesVersion``.

The version -> feature table is ``gpuplan.k8sversions`` (with its sources); this
module only asks it, for each feature the spec uses, at the line that uses it:

* a static or Cluster API pool whose ``topology`` is not the default gets a kubelet
  drop-in file (``--config-dir``: alpha 1.28 behind an environment variable, beta 1.31);
* a Topology Manager policy other than ``none`` / scope ``pod``;
* ``preferClosestNUMANodes`` (policy option ``prefer-closest-numa-nodes``: alpha
  1.26, whose gate the kubelet refuses the option without; beta 1.28);
* ``cpuManagerPolicy: static`` (including the default under a policy) and
  ``memoryManagerPolicy: Static``.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.k8sversions import FEATURES, first, maturity, parse_version, show
from gpuplan.resolve import PoolView, ResolvedFleet

E_TOO_OLD = Code(
    "GP630", "feature not in this Kubernetes version", Severity.ERROR,
    "The pool uses a kubelet feature that the cluster's `kubernetesVersion` does not have, or has "
    "only as alpha behind a feature gate that gpuplan does not set: the kubelet refuses the "
    "setting and does not start (on Karpenter: nodes launched and terminated in a loop).",
    bad='kubernetesVersion: "1.27"\ntopology: {policy: restricted, preferClosestNUMANodes: true}',
    good='kubernetesVersion: "1.28"\ntopology: {policy: restricted, preferClosestNUMANodes: true}',
)
W_NODE_SWITCH = Code(
    "GP631", "feature needs a switch on the node", Severity.WARNING,
    "The feature exists in this `kubernetesVersion` but is off unless the node turns it on: "
    "kubelet drop-in files (`--config-dir`) are read on 1.28-1.30 only when the kubelet runs "
    "with `KUBELET_CONFIG_DROPIN_DIR_ALPHA` set; otherwise the pool's topology settings are ignored.",
    bad='kubernetesVersion: "1.29"\npools:\n  - {name: train, nodes: [...], topology: {policy: restricted}}',
    good='kubernetesVersion: "1.31"\npools:\n  - {name: train, nodes: [...], topology: {policy: restricted}}',
)

CODES = (E_TOO_OLD, W_NODE_SWITCH)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    text = rf.fleet.spec.cluster.kubernetes_version
    version = parse_version(text)
    for pv in rf.pools:
        yield from _pool(rf, pv, version, text)


def _uses(pv: PoolView) -> Iterator[tuple[str, tuple]]:
    from gpuplan.identity import effective_cpu_manager_policy, topology_is_default

    t = pv.pool.topology
    tp = pv.path + ("topology",)
    if (pv.pool.is_static or pv.pool.capi is not None) and not topology_is_default(t):
        yield "kubelet-config-dir", tp  # static nodes, and Cluster API's bootstrap config (--config-dir)
    if t.policy != "none":
        yield "topology-manager", tp + ("policy",)
        if t.scope == "pod":
            yield "topology-manager-pod-scope", tp + ("scope",)
    if t.prefer_closest_numa_nodes and t.policy != "none":  # written only with a policy
        yield "prefer-closest-numa-nodes", tp + ("preferClosestNUMANodes",)
    if effective_cpu_manager_policy(t) == "static":
        yield "cpu-manager", tp + ("cpuManagerPolicy",) if t.cpu_manager_policy else tp + ("policy",)
    if t.memory_manager_policy == "Static":
        yield "memory-manager", tp + ("memoryManagerPolicy",)


def _pool(rf: ResolvedFleet, pv: PoolView, version: tuple[int, int], text: str) -> Iterator[Diagnostic]:
    for feature, path in _uses(pv):
        f = FEATURES[feature]
        m = maturity(feature, version)
        usable = first(feature)
        key = path[-1] == "topology"
        if m == "missing" or (m == "alpha" and feature != "kubelet-config-dir"):
            state = "does not exist" if m == "missing" else f"is alpha (feature gate {f.gate}, which gpuplan does not set)"
            since = f"on by default from {show(usable)}"
            if f.alpha and f.alpha != usable and feature == "kubelet-config-dir":
                since = f"from {show(f.alpha)} with {f.gate}, " + since
            yield rf.diag(
                E_TOO_OLD,
                f"pool {pv.name!r} uses the {f.title}, which {state} in Kubernetes {text}; {since} "
                f"(source: {f.source})",
                path, key=key,
                hint=f"set kubernetesVersion to {show(usable)} or later if the cluster runs it, or drop the setting",
            )
        elif m == "alpha":
            yield rf.diag(
                W_NODE_SWITCH,
                f"pool {pv.name!r}: its topology settings are a kubelet drop-in file, and Kubernetes {text} reads "
                f"--config-dir only when the kubelet runs with KUBELET_CONFIG_DROPIN_DIR_ALPHA set (source: {f.source})",
                path, key=key,
                hint="set KUBELET_CONFIG_DROPIN_DIR_ALPHA=on in the kubelet's environment on these nodes, or "
                     f"upgrade to {show(usable)}",
            )
