"""Lowering: resolved spec -> artifacts (Kubernetes objects as plain data, or text).

One module per output target; each exposes
``lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterable[Artifact]``.
``produced`` summarises what earlier targets made (the gitops target lists the
files in kustomization.yaml and admits their kinds and namespaces in its
AppProject; the README describes them). Only the summaries outlive an artifact:
:func:`iter_artifacts` hands each one on as it is made, so the compiler can
render and drop it before the next is lowered, and a target that writes a file
per tenant yields them one by one. Peak memory is then the checked spec plus
one artifact, not the spec plus every object of the tree.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Iterator, Mapping

from gpuplan.artifacts import Artifact, Produced

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

TARGET_MODULES: tuple[str, ...] = (
    "gpuplan.lower.tenancy",
    "gpuplan.lower.admission",  # Kubernetes >= 1.30
    "gpuplan.lower.device_plugin",
    "gpuplan.lower.mig_parted",
    "gpuplan.lower.operator",
    "gpuplan.lower.node_labels",
    "gpuplan.lower.kubelet",
    "gpuplan.lower.karpenter",
    "gpuplan.lower.karpenter_aws",  # EC2NodeClass: the AWS provider (userData)
    "gpuplan.lower.karpenter_azure",  # AKSNodeClass: AKS Node Auto Provisioning
    # node-group back-ends (gpuplan.provisioning): objects for the cloud project or the management
    # cluster under provisioning/<back-end>/, not listed in the root kustomization (docs/gke.md)
    "gpuplan.lower.provision_gke",  # GKE node pools (Config Connector ContainerNodePool)
    "gpuplan.lower.provision_aks",  # AKS agent pools
    "gpuplan.lower.provision_capi",  # Cluster API MachineDeployments
    "gpuplan.lower.monitoring",  # only with spec.monitoring
    "gpuplan.lower.dra",  # DRA pools only
    "gpuplan.lower.kueue",  # only with spec.queueing; before gitops (Flux lists its HelmRelease)
    "gpuplan.queueing.volcano.lower",  # only with queueing.engine volcano; before gitops, like Kueue
    "gpuplan.queueing.volcano.admission",  # its admission policies (read by the placement proof)
    "gpuplan.lower.tenant_page",  # tenant pages without Kueue (kueue writes them otherwise)
    "gpuplan.lower.gitops",  # needs everything above
    "capacity report",  # CAPACITY.md: a slot the driver fills (the report reads the object checks' proof)
    "gpuplan.lower.docs",  # README.md: last, describes the tree
)
# Places in the target order for files a later stage makes: the driver hands them in
# (``reports``), so README.md and the kustomization describe them like any target's.
SLOTS = frozenset({"capacity report"})


def iter_artifacts(rf: "ResolvedFleet", *, only: Collection[str] | None = None,
                   reports: Mapping[str, Callable[[], Iterable[Artifact]]] | None = None) -> Iterator[Artifact]:
    """Every artifact of the tree, in target order, each as soon as it is made.
    ``only``: just these targets (the object checks read a few); ``reports``: what
    the driver puts in each slot (a slot without one is left out)."""
    produced: list[Produced] = []
    seen: set[str] = set()
    for name in TARGET_MODULES:
        if only is not None and name not in only:
            continue
        if name in SLOTS:
            make = (reports or {}).get(name)
            if make is None:
                continue
            made: Iterable[Artifact] = make()
        else:
            try:
                mod = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name == name:
                    continue
                raise
            made = mod.lower(rf, tuple(produced))
        for a in made:
            if a.path in seen:
                raise RuntimeError(f"two targets produced the same file: {a.path}")
            seen.add(a.path)
            produced.append(Produced.of(a))
            yield a


def lower_all(rf: "ResolvedFleet") -> list[Artifact]:
    """Every artifact at once, sorted by path (tests and small trees)."""
    return sorted(iter_artifacts(rf), key=lambda a: a.path)
