"""Publishing the node's inventory as one small ConfigMap (node-probe DaemonSet).

Design (node-probe/README.md has the 1,000-node reasoning):
- one ConfigMap per node, ``gpuplan-system/inventory-<node>``, labelled
  ``app.kubernetes.io/name=gpuplan-node-probe`` so the pull side needs one
  LIST with a label selector;
- the document carries no timestamp, so its SHA-256 (kept in an annotation)
  changes only when the hardware or driver does; the probe writes only then;
- each cycle is one GET plus, rarely, one write; cycles are hours apart and
  jittered, so 1,000 nodes cost well under one request per second;
- no watch, no informer, no client library: urllib and the pod's service
  account token (re-read each request because bound tokens rotate).

The HTTP client is an interface (``KubeApi``) so tests drive the logic with a
dict-backed fake and the real client against a local HTTP server.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

LABEL_NAME = "app.kubernetes.io/name"
LABEL_VALUE = "gpuplan-node-probe"
SELECTOR = f"{LABEL_NAME}={LABEL_VALUE}"
ANNOTATION_NODE = "gpuplan.dev/node"
ANNOTATION_HASH = "gpuplan.dev/inventory-sha256"
DATA_KEY = "inventory.yaml"
DEFAULT_NAMESPACE = "gpuplan-system"

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class PublishError(Exception):
    """The API server refused or could not be reached."""


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def configmap_name(node: str) -> str:
    """``inventory-<node>``; names over 253 characters are cut and suffixed
    with a hash so two long node names never collide."""
    name = f"inventory-{node}".lower()
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return name[: 253 - 11].rstrip(".-") + "-" + digest


def configmap_body(node: str, namespace: str, text: str, owner_uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": configmap_name(node),
        "namespace": namespace,
        "labels": {
            LABEL_NAME: LABEL_VALUE,
            "app.kubernetes.io/component": "inventory",
            "app.kubernetes.io/part-of": "gpuplan",
        },
        # the node name can exceed a label value's 63 characters: annotation
        "annotations": {ANNOTATION_NODE: node, ANNOTATION_HASH: content_hash(text)},
    }
    if owner_uid:
        # garbage-collected with its Node; namespaced dependents of a
        # cluster-scoped owner are allowed. No blockOwnerDeletion: that would
        # need update rights on nodes/finalizers.
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": owner_uid}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {DATA_KEY: text}}


class KubeApi(Protocol):
    def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create_configmap(self, namespace: str, body: dict[str, Any]) -> None: ...
    def patch_configmap(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...
    def get_node_uid(self, name: str) -> str | None: ...


def publish_once(api: KubeApi, node: str, text: str, *, namespace: str = DEFAULT_NAMESPACE) -> str:
    """Make ``namespace/inventory-<node>`` hold ``text``. Returns "created",
    "updated" or "unchanged"; raises PublishError."""
    name = configmap_name(node)
    digest = content_hash(text)
    current = api.get_configmap(namespace, name)
    if current is None:
        try:
            uid = api.get_node_uid(node)
        except PublishError:
            uid = None  # no RBAC for nodes: publish without the owner reference
        api.create_configmap(namespace, configmap_body(node, namespace, text, uid))
        return "created"
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_HASH) == digest and (current.get("data") or {}).get(DATA_KEY) == text:
        return "unchanged"
    patch = {
        "metadata": {"annotations": {ANNOTATION_NODE: node, ANNOTATION_HASH: digest}},
        "data": {DATA_KEY: text},
    }
    api.patch_configmap(namespace, name, patch)
    return "updated"


# --- durations ---------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """"6h", "10m", "1h30m", "45s" -> seconds."""
    s = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a duration: {text!r} (use e.g. 6h, 10m, 1h30m, 45s)")
    return total


# --- the loop ------------------------------------------------------------------


@dataclass
class LoopOptions:
    interval: float = 6 * 3600
    jitter: float = 600
    namespace: str = DEFAULT_NAMESPACE
    max_backoff: float = 1800


def run_loop(
    produce: Callable[[], tuple[str, str]],
    api: KubeApi,
    opts: LoopOptions,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    log: Callable[[str], None] = print,
    cycles: int | None = None,
) -> None:
    """Probe and publish forever (or ``cycles`` times, for tests).

    ``produce`` returns (node name, document text). A jittered first sleep
    spreads a DaemonSet rollout over ``jitter`` seconds; after a failure the
    next try comes after an exponential backoff (with jitter), capped.
    """
    rng = rng or random.Random()
    sleep(rng.uniform(0, opts.jitter))
    failures = 0
    n = 0
    while cycles is None or n < cycles:
        n += 1
        try:
            node, text = produce()
            result = publish_once(api, node, text, namespace=opts.namespace)
            log(f"gpuplan probe: {opts.namespace}/{configmap_name(node)} {result}")
            failures = 0
            delay = opts.interval + rng.uniform(-opts.jitter, opts.jitter)
        except PublishError as exc:
            failures += 1
            delay = min(opts.max_backoff, 30 * 2 ** (failures - 1)) * rng.uniform(0.5, 1.0)
            log(f"gpuplan probe: publish failed ({exc}); retrying in {delay:.0f}s")
        if cycles is None or n < cycles:
            sleep(max(1.0, delay))


# --- a minimal in-cluster client ---------------------------------------------------


class InClusterApi:
    """The four calls the probe needs, over HTTPS with the pod's service
    account. ``base_url``/``token_file``/``ca_file`` are overridable for tests."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token_file: Path | None = None,
        ca_file: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        if base_url is None:
            host = os.environ.get("KUBERNETES_SERVICE_HOST")
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise PublishError("not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset)")
            if ":" in host:  # IPv6 literal
                host = f"[{host}]"
            base_url = f"https://{host}:{port}"
        self.base_url = base_url.rstrip("/")
        self.token_file = token_file if token_file is not None else SA_DIR / "token"
        self.timeout = timeout
        self.context: ssl.SSLContext | None = None
        if self.base_url.startswith("https://"):
            ca = ca_file if ca_file is not None else SA_DIR / "ca.crt"
            self.context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None)

    def _request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = {"Accept": "application/json", "User-Agent": "gpuplan-node-probe"}
        try:
            headers["Authorization"] = "Bearer " + self.token_file.read_text().strip()
        except OSError:
            pass  # anonymous; the API server will say 401/403
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                raw = resp.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            detail = ""
            try:
                detail = json.loads(exc.read() or b"{}").get("message", "")
            except (ValueError, AttributeError):
                pass
            raise PublishError(f"{method} {path}: HTTP {exc.code} {detail}".strip()) from None
        except (urllib.error.URLError, OSError) as exc:
            raise PublishError(f"{method} {path}: {getattr(exc, 'reason', exc)}") from None

    def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def create_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        self._request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body)

    def patch_configmap(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            patch,
            content_type="application/merge-patch+json",
        )

    def get_node_uid(self, name: str) -> str | None:
        node = self._request("GET", f"/api/v1/nodes/{name}")
        return None if node is None else (node.get("metadata") or {}).get("uid")
