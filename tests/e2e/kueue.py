"""The Kueue manager (sigs.k8s.io/kueue at the version gpuplan pins) on the test control plane,
configured from the tree's own chart values.

The manager runs as a process on 127.0.0.1 with the Configuration gpuplan generated
(``kueue/values.yaml`` ``managerConfig.controllerManagerConfigYaml``), changed only where a
process outside a pod needs it: the webhook server listens on 127.0.0.1 with the test CA's
certificate (``internalCertManagement`` off), no metrics or health listeners, no leader
election. Its webhook configurations are the module's own
(``config/components/webhook/manifests.yaml``, named as the chart names them) with the service
reference replaced by the local URL; only the webhooks of Kueue's own kinds and of the enabled
integrations are kept, as the manager serves only those. It authenticates as the chart's
ServiceAccount (the admission policies know Kueue by that name)."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import yaml

KUEUE_MODULE = "sigs.k8s.io/kueue"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manager_config(tree: Path, namespace: str, port: int, cert_dir: Path) -> dict[str, Any]:
    values = yaml.safe_load((tree / "kueue" / "values.yaml").read_text(encoding="utf-8"))
    cfg = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    cfg["namespace"] = namespace
    cfg["webhook"] = {**(cfg.get("webhook") or {}), "port": port, "host": "127.0.0.1", "certDir": str(cert_dir)}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["metrics"] = {"bindAddress": "0"}
    cfg["health"] = {"healthProbeBindAddress": "0"}
    cfg["leaderElection"] = {"leaderElect": False}
    # the on-demand visibility API is an aggregated API server behind a Service (the chart's); it
    # admits nothing, and a process outside a pod cannot serve it (kueue pkg/visibility reads its
    # certificate from /visibility): off here, and every other gate as the tree sets it
    cfg["featureGates"] = {**(cfg.get("featureGates") or {}), "VisibilityOnDemand": False}
    return cfg


def _served(webhook: dict[str, Any], frameworks: list[str]) -> bool:
    """Whether the manager serves this webhook: Kueue's own kinds always; a job kind only when
    its integration is enabled (kueue pkg/controller/jobframework/setup.go)."""
    plural = {f.split("/")[-1].lower() + "s" for f in frameworks}
    for rule in webhook.get("rules", []):
        if "kueue.x-k8s.io" in rule.get("apiGroups", []):
            return True
        if any(r in plural for r in rule.get("resources", [])):
            return True
    return False


def webhook_configurations(kueue_dir: Path, port: int, ca: bytes, frameworks: list[str]) -> list[dict[str, Any]]:
    out = []
    for d in yaml.safe_load_all((kueue_dir / "config/components/webhook/manifests.yaml").read_text()):
        if not isinstance(d, dict):
            continue
        d["metadata"]["name"] = "kueue-" + d["metadata"]["name"]  # config/default namePrefix
        hooks = [w for w in d.get("webhooks", []) if _served(w, frameworks)]
        for w in hooks:
            path = w["clientConfig"]["service"]["path"]
            w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()}
        d["webhooks"] = hooks
        out.append(d)
    return out


# kueue v0.19.2 cmd/kueue/main.go:215-229: without internal certificate management the manager reads
# its metrics server's certificate from this fixed path and exits when it is missing (even with
# metrics off, as here)
METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def _metrics_certs(cert_dir: Path) -> None:
    import shutil

    try:
        METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for f in ("tls.crt", "tls.key"):
            shutil.copy(cert_dir / f, METRICS_CERTS / f)
    except OSError as exc:
        raise AssertionError(f"the Kueue manager reads its metrics certificate from {METRICS_CERTS} "
                             f"(kueue cmd/kueue/main.go): it cannot be written here ({exc}); run the tests "
                             "as root, or create that directory writable for this user") from exc


def start_kueue(cp, tree: Path, rf) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
    from controlplane import module_dir

    q = rf.fleet.spec.queueing
    namespace = q.kueue.namespace
    from gpuplan.queues import kueue_user

    port = _free_port()
    cert_dir = cp.dir / "pki" / "webhook-certs"
    cfg = manager_config(tree, namespace, port, cert_dir)
    frameworks = list((cfg.get("integrations") or {}).get("frameworks") or [])
    code, body = cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                          manager="gpuplan-test-setup")
    assert code < 300, body
    (cp.dir / "kueue-config.yaml").write_text(json.dumps(cfg, indent=1))
    user = kueue_user(rf)
    ns, sa = user.split(":")[2], user.split(":")[3]
    # the chart's ServiceAccount, as the manager's identity
    cp.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}},
             manager="gpuplan-test-setup")
    kc = json.loads(cp.kubeconfig.read_text())
    kc["users"][0]["user"].update({"as": user, "as-groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                                                            "system:authenticated"]})
    (cp.dir / "kueue.kubeconfig").write_text(json.dumps(kc, indent=1))
    _metrics_certs(cert_dir)
    ca = (cp.dir / "pki" / "ca.crt").read_bytes()
    for w in webhook_configurations(module_dir(KUEUE_MODULE), port, ca, frameworks):
        code, body = cp.apply(w, manager="gpuplan-test-setup")
        assert code < 300, (w["metadata"]["name"], body.get("message"))
    cp._spawn("kueue", [f"--config={cp.dir / 'kueue-config.yaml'}", f"--kubeconfig={cp.dir / 'kueue.kubeconfig'}",
                        "--zap-log-level=2"])

    def serving() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False
    cp.wait(serving, 120, "the Kueue manager's webhook server")
