"""The real Karpenter (sigs.k8s.io/karpenter at the version the test control plane pins, its
KWOK cloud provider) on the test control plane, launching nodes for a generated tree's NodePools.

- :func:`kwok_tree` copies the tree and points each NodePool's ``nodeClassRef`` at a
  ``KWOKNodeClass`` of the same name (written beside it, in the copy's root kustomization);
  every other field of the NodePools, and every other object (the EC2NodeClass/AKSNodeClass
  and NodeOverlays included), stays as generated.
- :func:`instance_types` writes the KWOK provider's instance-types file
  (sigs.k8s.io/karpenter kwok/cloudprovider/helpers.go ``InstanceTypeOptions``) for the
  instance types the NodePools allow, from gpuplan's own tables (``gpuplan.cloud.aws``,
  ``gpuplan.cloud.aks``): vCPUs, memory, pods, the table's extended resources
  (``nvidia.com/gpu`` = the GPU count), offerings with prices, and, in each offering's
  requirements, the provider's well-known labels the NodePools select on
  (``karpenter.k8s.aws/instance-gpu-*`` …): the KWOK provider makes an offering requirement's
  key well known and labels its nodes with it (helpers.go ``newInstanceType``,
  cloudprovider.go ``addInstanceLabels``), so Karpenter filters the instance types by those
  keys as the AWS provider does.
- :func:`start_karpenter` runs ``karpenter-kwok`` as a process with that file, no leader
  election, its metrics and health listeners on free ports, the ``NodeOverlay`` feature gate on
  when the tree has NodeOverlays, and a kubeconfig that impersonates the chart's ServiceAccount
  (``kube-system:karpenter``).

The provider creates each Node itself with the annotation ``kwok.x-k8s.io/node: fake``
(kwok/apis/v1alpha1/labels.go ``KwokLabelKey``/``KwokLabelValue``), the selector the control
plane's KWOK manages nodes by: KWOK makes them Ready. Such a Node's allocatable is the instance
type's resources plus what the launching NodeClaim requested (cloudprovider.go ``toNode``): a
NodeOverlay's other resources (a MIG node's other partition sizes) are not on it, as a device
plugin would put them."""

from __future__ import annotations

import json
import re
import shutil
import socket
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.engine import load_tree

KWOK_API = "karpenter.kwok.sh/v1alpha1"
KWOK_GROUP, KWOK_KIND = "karpenter.kwok.sh", "KWOKNodeClass"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
ARCH, OS = "kubernetes.io/arch", "kubernetes.io/os"
# the KWOK provider's own requirements of every instance type (helpers.go newInstanceType)
BUILT_IN = {INSTANCE_TYPE, ZONE, CAPACITY_TYPE, ARCH, OS}
# the chart's identity (charts/karpenter: ServiceAccount karpenter, installed in kube-system on EKS)
NAMESPACE, SERVICE_ACCOUNT = "kube-system", "karpenter"
# a zone no NodePool names: every instance type is offered there too, so a NodePool's zone
# requirement has something to exclude; both purchase options are offered everywhere likewise
OTHER_ZONE = "gpuplan-test-zone-z"
CAPACITY_TYPES = ("on-demand", "spot")
DEFAULT_ZONES = ("gpuplan-test-zone-a", "gpuplan-test-zone-b")
DEFAULT_PODS = "110"  # gpuplan's tables give no pod limit: the kubelet's default maxPods
NOMINAL_MEMORY_MIB_PER_CPU = 8192  # gpuplan's AKS table gives no memory: 8 GiB per vCPU, nominal


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the tree, pointed at KWOKNodeClasses ------------------------------------------------------


@dataclass
class KwokTree:
    root: Path
    nodepools: list[dict[str, Any]] = field(default_factory=list)  # as applied (kwok nodeClassRef)
    nodeclasses: list[dict[str, Any]] = field(default_factory=list)  # the KWOKNodeClasses
    overlays: list[dict[str, Any]] = field(default_factory=list)  # the tree's NodeOverlays
    originals: dict[str, dict[str, Any]] = field(default_factory=dict)  # the generated node classes, by name

    def pool_nodepools(self, pool: str) -> list[dict[str, Any]]:
        from gpuplan.identity import POOL_LABEL

        return [n for n in self.nodepools if n["spec"]["template"]["metadata"]["labels"].get(POOL_LABEL) == pool]


def nodepools_of(tree: Path) -> list[dict[str, Any]]:
    return [o for k, o in load_tree(tree).objects.items() if k[0] == "karpenter.sh" and k[1] == "NodePool"]


def kwok_tree(tree: Path, dest: Path) -> KwokTree:
    """A copy of ``tree`` at ``dest`` whose NodePools name a KWOKNodeClass."""
    shutil.copytree(tree, dest)
    t = load_tree(dest)
    out = KwokTree(dest)
    by_file: dict[str, list[tuple[str, str, str, str]]] = {}
    for k, o in t.objects.items():
        if k[0] == "karpenter.sh" and k[1] == "NodePool":
            by_file.setdefault(t.files[k], []).append(k)
        elif k[0] == "karpenter.sh" and k[1] == "NodeOverlay":
            out.overlays.append(o)
    new_files = []
    for rel, keys in sorted(by_file.items()):
        path = dest / rel
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
        classes: dict[str, dict[str, Any]] = {}
        for d in docs:
            if d.get("kind") != "NodePool":
                continue
            ref = d["spec"]["template"]["spec"]["nodeClassRef"]
            original = next((o for kk, o in t.objects.items()
                             if kk[1] == ref["kind"] and kk[3] == ref["name"] and kk[0] == ref["group"]), None)
            assert original is not None, f"{rel}: NodePool {d['metadata']['name']} names a {ref['kind']} " \
                                         f"{ref['name']} the tree does not have"
            out.originals[ref["name"]] = original
            d["spec"]["template"]["spec"]["nodeClassRef"] = {"group": KWOK_GROUP, "kind": KWOK_KIND,
                                                             "name": ref["name"]}
            meta = original["metadata"]
            classes[ref["name"]] = {
                "apiVersion": KWOK_API, "kind": KWOK_KIND,
                "metadata": {"name": ref["name"], "labels": dict(meta.get("labels") or {}),
                             **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {})},
            }
            out.nodepools.append(d)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
        for name, nc in sorted(classes.items()):
            f = Path(rel).parent / f"kwoknodeclass-{name}.yaml"
            (dest / f).write_text(yaml.safe_dump(nc, sort_keys=False), encoding="utf-8")
            new_files.append(f.as_posix())
            out.nodeclasses.append(nc)
    kust = dest / "kustomization.yaml"
    k = yaml.safe_load(kust.read_text(encoding="utf-8"))
    k["resources"] = sorted({*(k.get("resources") or []), *new_files})
    kust.write_text(yaml.safe_dump(k, sort_keys=False), encoding="utf-8")
    return out


# --- the KWOK provider's instance types --------------------------------------------------------


def _aws_labels(it) -> dict[str, str]:
    """The AWS provider's well-known labels of an instance type (aws/karpenter-provider-aws
    pkg/providers/instancetype/types.go ``computeRequirements``), from gpuplan's AWS table."""
    family = it.family
    out = {
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-size": it.name.split(".", 1)[1],
        "karpenter.k8s.aws/instance-cpu": str(it.cpu),
        "karpenter.k8s.aws/instance-memory": str(it.memory_mib),
    }
    m = re.match(r"^([a-z]+)(\d+)", family)
    if m:
        out["karpenter.k8s.aws/instance-category"] = m.group(1)
        out["karpenter.k8s.aws/instance-generation"] = m.group(2)
    if it.gpu_count and it.gpu_name:
        out["karpenter.k8s.aws/instance-gpu-name"] = it.gpu_name
        out["karpenter.k8s.aws/instance-gpu-count"] = str(it.gpu_count)
        if it.gpu_manufacturer:
            out["karpenter.k8s.aws/instance-gpu-manufacturer"] = it.gpu_manufacturer
        if it.gpu_memory_mib:
            out["karpenter.k8s.aws/instance-gpu-memory"] = str(it.gpu_memory_mib)
    if it.local_nvme_gib:
        out["karpenter.k8s.aws/instance-local-nvme"] = str(it.local_nvme_gib)
    return out


@dataclass(frozen=True)
class Machine:
    name: str
    cpu: int
    memory_mib: int
    gpus: int
    resources: dict[str, str]
    labels: dict[str, str]


def machine(name: str) -> Machine:
    """An instance type (VM size) from gpuplan's tables: AWS, else AKS."""
    from gpuplan.cloud import aks, aws

    it = aws.instance_type(name)
    if it is not None:
        return Machine(name, it.cpu, it.memory_mib, it.gpu_count, dict(it.resources), _aws_labels(it))
    vm = aks.machine_type(name)
    if vm is not None:
        # the vCPUs are in the size's name (Standard_NC24ads_A100_v4: 24); the table has no memory
        m = re.match(r"^Standard_[A-Z]+?(\d+)", name)
        assert m, f"no vCPU count in the VM size name {name}"
        cpu = int(m.group(1))
        return Machine(name, cpu, cpu * NOMINAL_MEMORY_MIB_PER_CPU, vm.gpu_count,
                       {"nvidia.com/gpu": str(vm.gpu_count)}, {})
    raise AssertionError(f"instance type {name} is in none of gpuplan's tables (gpuplan/cloud/data)")


def _in_values(np: dict[str, Any], key: str) -> list[str] | None:
    for r in np["spec"]["template"]["spec"].get("requirements") or []:
        if r["key"] == key and r["operator"] == "In":
            return list(r["values"])
    return None


def _storage(nodeclass: dict[str, Any] | None) -> str | None:
    """The root volume the node class gives a node (EC2NodeClass blockDeviceMappings rootVolume,
    AKSNodeClass osDiskSizeGB): the node's ephemeral storage."""
    spec = (nodeclass or {}).get("spec") or {}
    for b in spec.get("blockDeviceMappings") or []:
        if b.get("rootVolume") and (b.get("ebs") or {}).get("volumeSize"):
            return b["ebs"]["volumeSize"]
    if spec.get("osDiskSizeGB"):
        return f"{spec['osDiskSizeGB']}G"
    return None


def instance_types(kt: KwokTree, rf) -> list[dict[str, Any]]:
    """The KWOK provider's instance types for every instance type a NodePool of ``kt`` allows.
    Prices: the pool's ``pricePerGPUHour`` (spot: ``spotPricePerGPUHour``, else 40 %) per GPU,
    plus a thousandth per vCPU, so that of two types with the same GPUs the smaller is cheaper."""
    from gpuplan.identity import POOL_LABEL

    problems = []
    wanted: dict[str, dict[str, Any]] = {}  # instance type -> {zones, pool, storage}
    for np in kt.nodepools:
        name = np["metadata"]["name"]
        types = _in_values(np, INSTANCE_TYPE)
        if not types:
            problems.append(f"NodePool {name}: no `{INSTANCE_TYPE} In` requirement: the instance types "
                            "are not the pool's own")
            continue
        zones = _in_values(np, ZONE) or []
        pool = np["spec"]["template"]["metadata"]["labels"].get(POOL_LABEL)
        storage = _storage(kt.originals.get(np["spec"]["template"]["spec"]["nodeClassRef"]["name"]))
        for t in types:
            w = wanted.setdefault(t, {"zones": set(), "pool": pool, "storage": storage})
            w["zones"] |= set(zones)
    all_zones = sorted({z for w in wanted.values() for z in w["zones"]} or set(DEFAULT_ZONES)) + [OTHER_ZONE]
    out = []
    for name in sorted(wanted):
        m = machine(name)
        pool = rf.pool_by_name[wanted[name]["pool"]].pool
        per_gpu = float(pool.price_per_gpu_hour or 1.0)
        spot_per_gpu = float(pool.spot_price_per_gpu_hour or per_gpu * 0.4)
        gpus = max(m.gpus, 1)
        price = {"on-demand": per_gpu * gpus + m.cpu / 1000, "spot": spot_per_gpu * gpus + m.cpu / 1000}
        labels = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(m.labels.items())]
        offerings = [{"Price": round(price[ct], 6), "Available": True, "Requirements": [
            {"key": CAPACITY_TYPE, "operator": "In", "values": [ct]},
            {"key": ZONE, "operator": "In", "values": [z]},
            *labels,
        ]} for ct in CAPACITY_TYPES for z in all_zones]
        resources = {"cpu": str(m.cpu), "memory": f"{m.memory_mib}Mi", "pods": DEFAULT_PODS, **m.resources}
        if wanted[name]["storage"]:
            resources["ephemeral-storage"] = wanted[name]["storage"]
        out.append({"name": name, "offerings": offerings, "architecture": "amd64", "operatingSystems": ["linux"],
                    "resources": resources})
    # every key a NodePool requires must be one the provider knows, or Karpenter ignores it
    known = BUILT_IN | {k for it in out for o in it["offerings"] for k in (r["key"] for r in o["Requirements"])}
    for np in kt.nodepools:
        for r in np["spec"]["template"]["spec"].get("requirements") or []:
            if r["key"] not in known:
                problems.append(f"NodePool {np['metadata']['name']}: requirement key {r['key']} is none of the "
                                "instance types' labels (add it to tests/e2e/karpenter.py)")
    assert not problems, "\n".join(problems)
    return out


# --- the process -----------------------------------------------------------------------------


@dataclass
class Karpenter:
    cp: Any
    health_port: int
    instance_types: list[dict[str, Any]]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def log(self, n: int = 6000) -> str:
        return self.cp.log_tail("karpenter-kwok", n)


def start_karpenter(cp, kt: KwokTree, rf, *, timeout: float = 120) -> Karpenter:
    its = instance_types(kt, rf)
    f = cp.dir / "karpenter-instance-types.json"
    f.write_text(json.dumps(its, indent=1))
    user = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    code, body = cp.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}}, manager="gpuplan-test-setup")
    assert code < 300, body
    kc = json.loads(cp.kubeconfig.read_text())
    kc["users"][0]["user"].update({"as": user, "as-groups": ["system:serviceaccounts",
                                                            f"system:serviceaccounts:{NAMESPACE}",
                                                            "system:authenticated"]})
    (cp.dir / "karpenter.kubeconfig").write_text(json.dumps(kc, indent=1))
    health = _free_port()
    gates = "NodeOverlay=true" if kt.overlays else "NodeOverlay=false"
    env = {
        # controller-runtime reads the kubeconfig from $KUBECONFIG (Karpenter's own flag set has no --kubeconfig)
        "KUBECONFIG": str(cp.dir / "karpenter.kubeconfig"),
        "INSTANCE_TYPES_FILE_PATH": str(f),  # kwok/options: --instance-types-file-path
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(_free_port()),
        "HEALTH_PROBE_PORT": str(health),
        "FEATURE_GATES": gates,  # the rest at their defaults (pkg/operator/options)
        "SYSTEM_NAMESPACE": NAMESPACE,  # as the chart sets it
        "LOG_LEVEL": "debug",
    }
    cp._spawn("karpenter-kwok", [], env)
    k = Karpenter(cp, health, its)
    cp.wait(k.ready, timeout, "Karpenter's /readyz")
    return k
