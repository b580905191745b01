"""An example's tree on a running control plane: apply it as the engine does, create the nodes
its pools register, submit pods and read back what the API server and the scheduler did."""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.engine import Step, Tree, _flux_units, key, load_tree, steps

TENANT_USER = "tenant"  # who the proof's tenant_req is: any authenticated user of a namespace
ADMIN_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "gpuplan-test-users"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    # the users the tests impersonate; RBAC is not what is under test, admission is
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
}


@dataclass
class Refusal:
    step: str
    obj: str
    code: int
    message: str

    def __str__(self) -> str:
        return f"{self.step}: {self.obj} refused ({self.code}): {self.message}"


def show(obj: dict[str, Any]) -> str:
    g, k, ns, n = key(obj)
    return f"{k} {ns + '/' if ns else ''}{n}"


def tenant_page_objects(tree: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every Pod and Job a tenant page shows, with the page it comes from."""
    out = []
    for page in sorted((tree / "tenants").glob("*/README.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            for d in yaml.safe_load_all(block):  # a Volcano PodGroup comes with its first pod
                if isinstance(d, dict) and (d.get("apiVersion"), d.get("kind")) in (("v1", "Pod"), ("batch/v1", "Job")):
                    out.append((page.relative_to(tree).as_posix(), d))
    return out


@dataclass
class Deployed:
    cp: Any  # tests.cluster.controlplane.ControlPlane
    tree: Tree
    refusals: list[Refusal] = field(default_factory=list)
    applied: int = 0

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **({"labels": labels} if labels else {})}}
        code, body = self.cp.apply(ns, manager="gpuplan-test-setup")
        assert code < 300, f"namespace {name}: {code} {body.get('message')}"

    def apply_step(self, step: Step) -> list[Refusal]:
        out = []
        for o in step.apply:
            code, body = self.cp.apply(o, manager="argocd-controller" if self.tree.engine == "argocd" else "kustomize-controller")
            self.applied += 1
            if code >= 300:
                out.append(Refusal(step.name, show(o), code, body.get("message", "")))
        for o in step.prune:
            code, body = self.cp.delete(o)
            if code >= 300 and code != 404:
                out.append(Refusal(step.name + " (prune)", show(o), code, body.get("message", "")))
        self.refusals += out
        if any(o.get("apiVersion", "").startswith("admissionregistration.k8s.io/") for o in (*step.apply, *step.prune)):
            self.cp.wait_admission_policies()  # what the step wrote is what the next request meets
        return out

    def wait_default_service_account(self, namespace: str, timeout: float = 60) -> None:
        self.cp.wait(lambda: self.cp.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is not None,
                     timeout, f"ServiceAccount default in {namespace}")

    def wait_quotas(self, timeout: float = 60) -> None:
        """ResourceQuota admission refuses every pod a quota covers until the quota controller
        has written the quota's status (k8s.io/apiserver plugin/pkg/admission/resourcequota
        controller.go ``checkRequest``: "status unknown for quota")."""
        def synced() -> bool:
            body = self.cp.get("/api/v1/resourcequotas")
            return body is not None and all(
                set((q.get("status") or {}).get("hard", {})) == set(q["spec"].get("hard", {})) for q in body["items"])
        self.cp.wait(synced, timeout, "ResourceQuota status from the quota controller")


def case_namespaces(d: Deployed, cases) -> None:
    """The namespaces the proof's cases are tried in that the tree does not make (one that copied a
    tenant's labels, one of a removed tenant, the node agents'), with the labels of the case;
    then each one's default ServiceAccount and the quotas' status, which pod admission needs."""
    existing = {o["metadata"]["name"] for o in d.tree.objects.values() if o["kind"] == "Namespace"}
    for ns, labels in sorted({(c.namespace, tuple(sorted(c.namespace_labels.items()))) for c in cases}):
        if ns not in existing and ns != "default":
            d.ensure_namespace(ns, dict(labels))
        d.wait_default_service_account(ns)
    d.wait_quotas()


def submit_pod(cp, pod: dict[str, Any], namespace: str, request: dict[str, Any]) -> tuple[int, dict]:
    """A dry-run create of ``pod`` in ``namespace`` as the request's user."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = namespace
    user = request["userInfo"]["username"]
    return cp.create(pod, dry_run=True, impersonate=user, groups=("system:authenticated",))


def disagreements(cp, cases, attempts: int = 8) -> list[str]:
    """The proof's cases whose verdict the API server does not give. The admission plugin reads
    namespaces from its informer a moment after they are stored: a verdict that differs is asked
    again until it holds (a few seconds), so only a lasting difference counts."""
    pending = list(cases)
    out: list[str] = []
    for _ in range(attempts):
        out, still = [], []
        for c in pending:
            code, body = submit_pod(cp, c.pod, c.namespace, c.request)
            admitted = code == 201
            if admitted != c.admitted:
                still.append(c)
                out.append(f"{c.words} in {c.namespace} as {c.request['userInfo']['username']}: proof "
                           f"{'admits' if c.admitted else 'refuses'}, API server "
                           f"{'admits' if admitted else f'refuses ({code}): ' + body.get('message', '')[:300]}")
        if not still:
            break
        pending = still
        time.sleep(1.5)
    return out


PREREQUISITE_NAMESPACES = {
    # installed with the engine, before gpuplan's tree: Argo CD's and Flux's own namespaces
    "argocd": "Argo CD",
    "flux-system": "Flux",
}


def deploy(cp, tree_dir: Path) -> Deployed:
    """Apply the tree as its engine syncs it onto an empty cluster: the engine's own namespace
    (installed with the engine), the delivery objects outside the root (the bootstrap
    Application(s) and AppProject, applied by hand once, README), then the root's steps."""
    tree = load_tree(tree_dir)
    d = Deployed(cp, tree)
    code, body = cp.apply(ADMIN_BINDING, manager="gpuplan-test-setup")
    assert code < 300, body
    for ns in PREREQUISITE_NAMESPACES:
        d.ensure_namespace(ns)
    for st in steps(None, tree):
        d.apply_step(st)
    return d


def deployed_outside_root(d: Deployed) -> list[Refusal]:
    """The objects outside the root sync (delivery bootstrap, provisioning back-ends),
    applied after it, each into its namespace (created as its controller's install does)."""
    out = []
    done = ({k for o, ks in _flux_units(d.tree).values() for k in (key(o), *ks)} if d.tree.engine == "flux"
            else set())
    for o in sorted((o for o in d.tree.outside_root() if key(o) not in done),
                    key=lambda o: (o["kind"] != "Namespace", show(o))):
        ns = (o.get("metadata") or {}).get("namespace")
        if ns:
            d.ensure_namespace(ns)
        code, body = d.cp.apply(o)
        d.applied += 1
        if code >= 300:
            out.append(Refusal("outside the root", show(o), code, body.get("message", "")))
    return out


def wait_scheduled(cp, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def scheduled() -> bool:
        p = cp.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if p is None:
            return False
        seen["pod"] = p
        return bool(p["spec"].get("nodeName"))
    try:
        cp.wait(scheduled, timeout, f"pod {namespace}/{name} to be bound")
    except Exception as exc:
        conds = (seen.get("pod") or {}).get("status", {}).get("conditions", [])
        raise AssertionError(f"pod {namespace}/{name} not scheduled: {conds}") from exc
    return seen["pod"]


def job_pod(cp, namespace: str, job: str, timeout: float = 60) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def created() -> bool:
        body = cp.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")
        items = (body or {}).get("items") or []
        if items:
            found["pod"] = items[0]
        return bool(items)
    cp.wait(created, timeout, f"a pod of Job {namespace}/{job}")
    return found["pod"]


def sleep_until(pred, timeout: float, interval: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def dra_slices(rf, pool_of: dict[str, str]) -> list[dict[str, Any]]:
    """The ResourceSlices NVIDIA's DRA driver publishes on each node of a DRA pool, as gpuplan
    models them (gpuplan.dra.slices: the devices of the pool's MIG layout or whole GPUs), one
    pool per node: the real scheduler then allocates the tiers' claims (and the extended
    resources their DeviceClasses name) from them."""
    from gpuplan.dra.claims import is_dra
    from gpuplan.dra.slices import DRIVER, pool_devices, resource_slice

    out = []
    for node, pool in sorted(pool_of.items()):
        pv = rf.pool_by_name.get(pool)
        if pv is None or not is_dra(rf, pv):
            continue
        sl = resource_slice(pv, pool_devices(pv))
        sl["metadata"]["name"] = f"{node}-{DRIVER}"
        sl["spec"]["nodeName"] = node
        sl["spec"]["pool"]["name"] = node
        out.append(sl)
    return out
