"""NVIDIA's KAI Scheduler (github.com/NVIDIA/KAI-scheduler at the version the test control plane
pins, ``tests/cluster/kai/go.mod``) on the test control plane.

Three of KAI's processes run on 127.0.0.1, started with the arguments KAI's operator gives their
Deployments for the chart's default Config and SchedulingShard (KAI v0.20.1
pkg/operator/operands/{scheduler/resources_for_shard.go,binder/resources.go,
pod_grouper/resources.go} ``buildArgsList``): scheduler name ``kai-scheduler``, queue label
``kai.scheduler/queue``, node-pool label ``kai.scheduler/node-pool``, the default shard
(``partitionLabelValue: ""``: the nodes, Queues and PodGroups without a node-pool label):

- the scheduler, with the configuration file the operator writes for that shard
  (``configMapForShard``: its actions and plugins, binpack placement);
- the binder, which binds the pods of each BindRequest the scheduler writes;
- the pod grouper, which makes a PodGroup for a pod of ``kai-scheduler`` from its top owner.

The chart's PriorityClasses are installed too; its ``default-queue`` (and parent) are not: a
test that wants them creates them. KAI's scheduler lists Kueue's Topology at v1alpha1, which the
control plane's Topology CRD (Kueue v0.19.2's) does not serve: ``use_kai_topology_crd`` puts
KAI's own copy in its place, as KAI's chart installs it on a cluster without Kueue.

Not run: the operator (it would deploy these as pods), the admission webhook (GPU sharing and
runtime classes: nothing the scheduler needs to place whole GPUs), the queue and PodGroup
controllers (status only), the node-scale adjuster. Metrics and health listeners are off or on
free local ports; no leader election.

Each process authenticates as its chart ServiceAccount in the ``kai-scheduler`` namespace,
bound to the chart's own ClusterRoles (``deployments/kai-scheduler/templates/rbac/*.yaml`` of the
module, controller-gen output; the bindings' ``{{ .Release.Namespace }}`` filled in): what KAI
may do here is what its release grants it."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import yaml

KAI_MODULE = "github.com/NVIDIA/KAI-scheduler"
NAMESPACE = "kai-scheduler"
SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
RESERVATION = "kai-resource-reservation"  # the chart's global.resourceReservation names
SCALE_ADJUST_NAMESPACE = "kai-scale-adjust"
POD_GROUP_ANNOTATION = "pod-group-name"  # KAI pkg/common/constants/constants.go:34
DEFAULT_QUEUE = "default-queue"  # KAI pkg/podgrouper/podgrouper/plugins/constants/constants.go:19

# component -> (ServiceAccount, the chart's rbac file stem)
IDENTITIES = {
    "kai-scheduler": ("scheduler", "scheduler"),
    "kai-binder": ("binder", "binder"),
    "kai-podgrouper": ("pod-grouper", "podgrouper"),
}

# the operator's scheduler configuration for a binpack shard (KAI v0.20.1
# pkg/operator/operands/scheduler/resources_for_shard.go:129-184 configMapForShard: the chart's
# default shard sets placementStrategy binpack for gpu and cpu)
SCHEDULER_CONFIG: dict[str, Any] = {
    "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
    "tiers": [{"plugins": [
        {"name": n} for n in ("predicates", "proportion", "priority", "nodeavailability", "resourcetype",
                              "podaffinity", "elastic", "kubeflow", "ray", "subgrouporder", "taskorder",
                              "nominatednode", "dynamicresources", "minruntime", "topology", "snapshot", "gpupack")
    ] + [{"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}}, {"name": "gpusharingorder"}]}],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rbac(kai_dir: Path) -> list[dict[str, Any]]:
    """The chart's ClusterRoles and ClusterRoleBindings of the three components, and their
    ServiceAccounts."""
    out: list[dict[str, Any]] = []
    rbac_dir = kai_dir / "deployments" / "kai-scheduler" / "templates" / "rbac"
    for sa, stem in IDENTITIES.values():
        out.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": NAMESPACE}})
        for f in (f"{stem}.yaml", f"{stem}-binding.yaml"):
            text = (rbac_dir / f).read_text(encoding="utf-8")
            text = text.replace("{{ .Release.Namespace }}", NAMESPACE)
            if "{{" in text:
                raise AssertionError(f"{f} of {KAI_MODULE} has template expressions beyond the release namespace")
            out += [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    return out


def priority_classes(kai_dir: Path) -> list[dict[str, Any]]:
    """The chart's PriorityClasses (train 50, build-preemptible 75, build 100, inference 125):
    the pod grouper gives a PodGroup its pod's class, else ``train``; below 100 is preemptible
    (KAI pkg/common/podgroup/preemptible.go:10)."""
    d = kai_dir / "deployments" / "kai-scheduler" / "templates" / "priorityclasses"
    return [yaml.safe_load(f.read_text(encoding="utf-8")) for f in sorted(d.glob("*.yaml"))]


def _args(name: str, cp_dir: Path) -> list[str]:
    if name == "kai-scheduler":
        return [f"--scheduler-conf={cp_dir / 'kai-scheduler-config.yaml'}", f"--scheduler-name={SCHEDULER_NAME}",
                f"--namespace={NAMESPACE}", f"--nodepool-label-key={NODE_POOL_LABEL}", "--partition-label-value=",
                f"--resource-reservation-app-label={RESERVATION}",
                f"--listen-address=127.0.0.1:{_free_port()}", f"--plugin-server-port={_free_port()}",
                "--leader-elect=false"]
    if name == "kai-binder":
        return ["--scheduler-name", SCHEDULER_NAME, "--resource-reservation-namespace", RESERVATION,
                "--resource-reservation-service-account", RESERVATION, "--resource-reservation-app-label", RESERVATION,
                "--scale-adjust-namespace", SCALE_ADJUST_NAMESPACE, "--health-probe-bind-address", "0",
                "--metrics-bind-address", "0", "--cdi-enabled=false"]
    if name == "kai-podgrouper":
        return ["--scheduler-name", SCHEDULER_NAME, "--queue-label-key", QUEUE_LABEL,
                "--nodepool-label-key", NODE_POOL_LABEL, "--metrics-bind-address", "0",
                "--health-probe-bind-address", "0"]
    raise KeyError(name)


TOPOLOGY_CRD = "topologies.kueue.x-k8s.io"
# what the scheduler logs while it cannot list Kueue's v1alpha1 Topology (client-go's reflector)
TOPOLOGY_UNSERVED = re.compile(r"failed to list \*v1alpha1\.Topology: the server could not find the requested resource")


def _kai_dir() -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
    from controlplane import KAI_MODULE_DIR, module_dir

    return module_dir(KAI_MODULE, cwd=KAI_MODULE_DIR)


def kai_topology_crd() -> dict[str, Any]:
    """Kueue's Topology CRD as KAI ships it (``deployments/external-crds/``: v1alpha1 only, which
    KAI's scheduler lists, KAI v0.20.1 pkg/scheduler/cache/cluster_info/data_lister/
    kubernetes_lister.go:29-31). KAI's crd-upgrader applies it only where no Topology CRD exists
    (deployments/crd-upgrader/apply-crds.sh)."""
    f = _kai_dir() / "deployments" / "external-crds" / "kueue.x-k8s.io_topologies.yaml"
    return yaml.safe_load(f.read_text(encoding="utf-8"))


def use_kai_topology_crd(cp) -> None:
    """Replace the control plane's Topology CRD (Kueue v0.19.2's: v1beta1 and v1beta2, no
    v1alpha1) with KAI's: the cluster KAI's chart makes where Kueue is not installed."""
    code, body = cp.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{TOPOLOGY_CRD}")
    assert code in (200, 202, 404), body
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{TOPOLOGY_CRD}"
    cp.wait(lambda: cp.get(path) is None, 60, f"CRD {TOPOLOGY_CRD} deleted")
    cp.install_crds([kai_topology_crd()])


def scheduler_log(cp) -> str:
    return cp.log_tail("kai-scheduler", 2_000_000)


def cycled(cp) -> bool:
    """Whether KAI's scheduler has begun a scheduling cycle (pkg/scheduler/scheduler.go:119)."""
    return "Start scheduling ..." in scheduler_log(cp)


def start_kai(cp, kai_bin: Path, wait: bool = True) -> None:
    """Start the scheduler, the binder and the pod grouper against ``cp``; with ``wait``, return
    once the scheduler has begun a scheduling cycle (its caches synced)."""
    for ns in (NAMESPACE, RESERVATION, SCALE_ADJUST_NAMESPACE):
        code, body = cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                              manager="gpuplan-test-setup")
        assert code < 300, body
    kai_dir = _kai_dir()
    for o in rbac(kai_dir) + priority_classes(kai_dir):
        code, body = cp.apply(o, manager="gpuplan-test-setup")
        assert code < 300, (o["kind"], o["metadata"]["name"], body.get("message"))
    (cp.dir / "kai-scheduler-config.yaml").write_text(yaml.safe_dump(SCHEDULER_CONFIG, sort_keys=False))
    base = json.loads(cp.kubeconfig.read_text())
    for name, (sa, _) in IDENTITIES.items():
        kc = json.loads(json.dumps(base))
        kc["users"][0]["user"].update({
            "as": f"system:serviceaccount:{NAMESPACE}:{sa}",
            "as-groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]})
        path = cp.dir / f"{name}.kubeconfig"
        path.write_text(json.dumps(kc, indent=1))
        # controller-runtime's GetConfigOrDie reads $KUBECONFIG (every KAI command loads its config so)
        cp._spawn(name, _args(name, cp.dir), env={"KUBECONFIG": str(path)}, exe=kai_bin / name)
    if wait:
        # client-go's reflector retries a failed list with a backoff of up to ~a minute
        cp.wait(lambda: cycled(cp), 180, "the KAI scheduler's first scheduling cycle")
