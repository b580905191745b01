"""GP986: a static pool's NoExecute taint, which nfd-master would apply to running nodes.

A static pool's taints reach its nodes through its NFD NodeFeatureRule (``taints:``, with
nfd-master's ``-enable-taints``; ``gpuplan.lower.node_labels``): nfd-master adds them to nodes
that already run, on the first sync of the tree and whenever a node joins the rule
(kubernetes-sigs/node-feature-discovery@v0.19.0 ``pkg/nfd-master/nfd-master.go`` lines 986-1056). A ``NoExecute``
taint that appears on a running node evicts, at once, every pod on it that does not tolerate it:
the taint-eviction controller deletes such a pod with no delay (kubernetes/kubernetes v1.36.3
``pkg/controller/tainteviction/taint_eviction.go``: ``handleNodeUpdate`` lines 533-588 runs
``processPodOnNode`` for every pod of the node, which queues the deletion for ``now`` when not
all taints are tolerated, lines 451-470; ``deletePodHandler``/``addConditionAndDeletePod``
lines 107-148). DaemonSet pods go too and are not recreated: the DaemonSet controller keeps a
scheduled pod only if it tolerates the node's NoExecute taints and places none where a
NoExecute or NoSchedule taint is untolerated (``pkg/controller/daemon/daemon_controller.go``
``NodeShouldRunDaemonPod`` lines 1378-1401, ``predicates`` lines 1404-1413). The node's CNI,
kube-proxy, log and monitoring agents, and the tenants' running jobs, are lost unless each
tolerates the taint. gpuplan adds its taints only to the GPU Operator's and NFD's tolerations.

The spec's ``NoExecute`` is refused on static pools rather than lowered to ``NoSchedule``: the
two differ exactly in what happens to running pods, and which one the cluster gets is the
operator's call. ``NoSchedule`` keeps new pods off; existing ones stay until they end or the
node is drained. Autoscaled pools keep NoExecute: their template taints a node when it is
created, before any pod runs there.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import static_nodes
from gpuplan.resolve import ResolvedFleet

E_NFD_NO_EXECUTE = Code(
    "GP986", "NoExecute taint on a static pool", Severity.ERROR,
    "A static pool's taints are applied to its running nodes by nfd-master (through the pool's "
    "NodeFeatureRule). A `NoExecute` taint that appears on a running node makes Kubernetes' "
    "taint-eviction controller delete at once every pod there that does not tolerate it: the "
    "node's CNI, kube-proxy, logging and monitoring agents (their DaemonSets do not recreate them) "
    "and the jobs already running. Use `NoSchedule`, which keeps new pods off and lets running ones "
    "finish; drain the nodes by hand if they must leave now.",
    bad="pools:\n  - name: train\n    nodes: [gpu-01]\n    taints: [{key: gpu, value: \"true\", effect: NoExecute}]",
    good="pools:\n  - name: train\n    nodes: [gpu-01]\n    taints: [{key: gpu, value: \"true\", effect: NoSchedule}]",
)

CODES = (E_NFD_NO_EXECUTE,)


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    for pv in rf.pools:
        if not static_nodes(pv.pool):
            continue
        for j, t in enumerate(pv.pool.taints or ()):
            if t.effect != "NoExecute":
                continue
            yield rf.diag(
                E_NFD_NO_EXECUTE,
                f"static pool {pv.name}: taint {t.key}:NoExecute would be applied by nfd-master to running "
                "nodes and evict every pod there that does not tolerate it (node agents included)",
                (*pv.path, "taints", j, "effect"),
                hint="use effect: NoSchedule (drain the nodes by hand if running pods must leave)")
