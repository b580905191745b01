"""The node-probe publishing loop: one ConfigMap per node, written only on change."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from gpuplan.probe.publish import (
    ANNOTATION_HASH,
    ANNOTATION_NODE,
    DATA_KEY,
    InClusterApi,
    LoopOptions,
    PublishError,
    configmap_body,
    configmap_name,
    content_hash,
    parse_duration,
    publish_once,
    run_loop,
)


class DictApi:
    def __init__(self, node_uid="uid-1", nodes_forbidden=False, fail_times=0):
        self.objects: dict[tuple[str, str], dict] = {}
        self.writes: list[str] = []
        self.reads = 0
        self.node_uid = node_uid
        self.nodes_forbidden = nodes_forbidden
        self.fail_times = fail_times

    def get_configmap(self, ns, name):
        self.reads += 1
        if self.fail_times:
            self.fail_times -= 1
            raise PublishError("HTTP 503")
        return self.objects.get((ns, name))

    def create_configmap(self, ns, body):
        self.writes.append("create")
        self.objects[(ns, body["metadata"]["name"])] = body

    def patch_configmap(self, ns, name, patch):
        self.writes.append("patch")
        obj = self.objects[(ns, name)]
        obj["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        obj["data"].update(patch["data"])

    def get_node_uid(self, name):
        if self.nodes_forbidden:
            raise PublishError("HTTP 403")
        return self.node_uid


def test_create_then_unchanged_then_update():
    api = DictApi()
    assert publish_once(api, "gpu-1", "a: 1\n") == "created"
    obj = api.objects[("gpuplan-system", "inventory-gpu-1")]
    assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "gpuplan-node-probe"
    assert obj["metadata"]["annotations"] == {ANNOTATION_NODE: "gpu-1", ANNOTATION_HASH: content_hash("a: 1\n")}
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": "uid-1"}]
    assert publish_once(api, "gpu-1", "a: 1\n") == "unchanged"
    assert publish_once(api, "gpu-1", "a: 2\n") == "updated"
    assert obj["data"][DATA_KEY] == "a: 2\n"
    assert api.writes == ["create", "patch"]


def test_no_owner_reference_without_node_rights():
    api = DictApi(nodes_forbidden=True)
    publish_once(api, "gpu-1", "x\n")
    assert "ownerReferences" not in api.objects[("gpuplan-system", "inventory-gpu-1")]["metadata"]


def test_configmap_body_is_a_valid_configmap():
    import kubernetes_validate

    body = configmap_body("gpu-1", "gpuplan-system", "a: 1\n", "uid")
    kubernetes_validate.validate(body, "1.33.0", strict=True)


def test_long_node_names_stay_within_limits():
    long = "n" * 250
    name = configmap_name(long)
    assert len(name) <= 253 and name != configmap_name(long + "x")
    assert configmap_name("gpu-1") == "inventory-gpu-1"


def test_durations():
    assert parse_duration("6h") == 21600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("45s") == 45 and parse_duration("90") == 90
    for bad in ("", "6 hours", "h", "1x"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_loop_writes_once_and_sleeps_with_jitter():
    api = DictApi()
    sleeps: list[float] = []
    run_loop(lambda: ("gpu-1", "same\n"), api, LoopOptions(interval=3600, jitter=600),
             sleep=sleeps.append, rng=random.Random(1), log=lambda m: None, cycles=4)
    assert api.writes == ["create"] and api.reads == 4
    assert 0 <= sleeps[0] <= 600
    assert all(3000 <= s <= 4200 for s in sleeps[1:]) and len(sleeps) == 4


def test_loop_backs_off_after_failures():
    api = DictApi(fail_times=3)
    sleeps: list[float] = []
    logs: list[str] = []
    run_loop(lambda: ("gpu-1", "x\n"), api, LoopOptions(interval=3600, jitter=0),
             sleep=sleeps.append, rng=random.Random(2), log=logs.append, cycles=4)
    assert api.writes == ["create"]
    assert sleeps[1] < sleeps[2] < sleeps[3] <= 120  # 30s, 60s, 120s scaled by [0.5, 1)
    assert sum("publish failed" in l for l in logs) == 3


class _Handler(BaseHTTPRequestHandler):
    store: dict = {}
    seen: list = []

    def log_message(self, *a):
        pass

    def _reply(self, code, obj=None):
        body = json.dumps(obj or {}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length", 0))
        return json.loads(self.rfile.read(n)) if n else None

    def do_GET(self):
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path == "/api/v1/nodes/gpu-1":
            return self._reply(200, {"metadata": {"uid": "node-uid"}})
        obj = self.store.get(self.path)
        return self._reply(200, obj) if obj else self._reply(404, {"message": "not found"})

    def do_POST(self):
        body = self._body()
        self.seen.append(("POST", self.path, self.headers.get("Content-Type")))
        self.store[f"{self.path}/{body['metadata']['name']}"] = body
        self._reply(201, body)

    def do_PATCH(self):
        body = self._body()
        self.seen.append(("PATCH", self.path, self.headers.get("Content-Type")))
        if self.path.endswith("forbidden"):
            return self._reply(403, {"message": "configmaps is forbidden"})
        obj = self.store[self.path]
        obj["data"].update(body["data"])
        obj["metadata"]["annotations"].update(body["metadata"]["annotations"])
        self._reply(200, obj)


@pytest.mark.slow
def test_in_cluster_client_against_a_local_api_server(tmp_path):
    token = tmp_path / "token"
    token.write_text("t0k3n\n")
    _Handler.store, _Handler.seen = {}, []
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = InClusterApi(f"http://127.0.0.1:{server.server_port}", token_file=token)
        assert publish_once(api, "gpu-1", "a: 1\n") == "created"
        assert publish_once(api, "gpu-1", "a: 1\n") == "unchanged"
        assert publish_once(api, "gpu-1", "a: 2\n") == "updated"
        stored = _Handler.store["/api/v1/namespaces/gpuplan-system/configmaps/inventory-gpu-1"]
        assert stored["data"][DATA_KEY] == "a: 2\n"
        assert stored["metadata"]["ownerReferences"][0]["uid"] == "node-uid"
        methods = [s[0] for s in _Handler.seen]
        assert methods == ["GET", "GET", "POST", "GET", "GET", "PATCH"]
        assert ("PATCH", "/api/v1/namespaces/gpuplan-system/configmaps/inventory-gpu-1",
                "application/merge-patch+json") in _Handler.seen
        assert _Handler.seen[0][2] == "Bearer t0k3n"
        with pytest.raises(PublishError, match="HTTP 403 configmaps is forbidden"):
            api.patch_configmap("gpuplan-system", "forbidden", {"data": {}, "metadata": {"annotations": {}}})
    finally:
        server.shutdown()
    with pytest.raises(PublishError):
        InClusterApi(f"http://127.0.0.1:{server.server_port}", token_file=token, timeout=2).get_configmap("a", "b")


def test_not_in_a_pod(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PublishError, match="not running in a Kubernetes pod"):
        InClusterApi()
