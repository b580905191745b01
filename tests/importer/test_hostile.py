"""`gpuplan import` on exports that tenants wrote into: ConfigMaps and claim templates
outside the place they are trusted, objects of the wrong shape, large exports and
strings YAML readers take for something else."""

from __future__ import annotations

import copy
import io
import json

import pytest
import yaml

from gpuplan.importer.pipeline import import_cluster
from gpuplan.importer.read import MAX_FILE_BYTES, MAX_STDIN_BYTES
from tests.importer.snapshot import REPO, dump, snapshot
from tests.importer.test_import import CLUSTER_POLICY, MIG_PARTED, TS_CONFIG, _cm, _node, _ns, _quota, _run


def _codes(r) -> list[str]:
    return [d.code for d in r.diagnostics]


def _spec(r) -> dict:
    assert r.text is not None, r.diagnostics
    return yaml.safe_load(r.text)["spec"]


# ----------------------------------------------------------------- 1: the operator's ConfigMaps


def _ts_nodes():
    return [_node(f"gpu-{i}", labels={"nvidia.com/device-plugin.config": "a100-ts"}) for i in (1, 2)]


def _ts_cm(ns, replicas):
    return _cm("time-slicing-config", {"any": "version: v1\nflags:\n  migStrategy: none\n",
                                       "a100-ts": TS_CONFIG.replace("replicas: 4", f"replicas: {replicas}")}, ns=ns)


def test_tenant_configmap_in_its_namespace_is_not_operator_configuration():
    # the tenant's namespace sorts before the operator's
    r = _run([CLUSTER_POLICY, _ts_cm("aaa-tenant", 8), _ts_cm("gpu-operator", 4), *_ts_nodes()])
    spec = _spec(r)
    assert "namespace" not in spec["cluster"]["gpuOperator"]
    [pool] = spec["pools"]
    assert pool["sharing"]["replicas"] == 4
    [w] = [d for d in r.diagnostics if d.code == "GP965"]
    assert "aaa-tenant/time-slicing-config" in w.message and "only the operator's namespace" in w.message
    assert w.file == "<stdin>" and w.line is not None and w.hint


def test_without_operator_evidence_only_the_default_namespace_is_read():
    r = _run([_ts_cm("aaa-tenant", 8), _cm("tenant-mig", {"config.yaml": MIG_PARTED}, ns="aaa-tenant"),
              _node("mig-1", labels={"nvidia.com/mig.config": "mixed-a100"}), *_ts_nodes()])
    spec = _spec(r)
    assert "namespace" not in spec["cluster"]["gpuOperator"]
    assert all(p["sharing"]["mode"] == "exclusive" for p in spec["pools"])
    found = sorted(d.message for d in r.diagnostics if d.code == "GP965")
    assert len(found) == 2 and "aaa-tenant/tenant-mig" in found[0] and "aaa-tenant/time-slicing-config" in found[1]
    assert all("(gpu-operator)" in m for m in found)
    # the nodes' selected config is missing, not silently dropped
    assert any(d.code == "GP956" and "a100-ts" in d.message for d in r.diagnostics)


@pytest.mark.parametrize("evidence", ["policy", "deployment"])
def test_operator_namespace_from_the_operators_own_objects(evidence):
    ns = "nvidia-gpu-operator"
    extra = ({**CLUSTER_POLICY, "status": {**CLUSTER_POLICY["status"], "namespace": ns}} if evidence == "policy"
             else {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-operator", "namespace": ns},
                   "spec": {"template": {"spec": {"containers": [{"name": "gpu-operator", "image": "nvcr.io/x"}]}}}})
    r = _run([extra, _ts_cm(ns, 4), _ts_cm("aaa-tenant", 8), *_ts_nodes()])
    spec = _spec(r)
    assert spec["cluster"]["gpuOperator"]["namespace"] == ns
    assert spec["pools"][0]["sharing"]["replicas"] == 4
    assert [d for d in r.diagnostics if d.code == "GP965" and "aaa-tenant/" in d.message]


def test_a_tenants_operator_deployment_does_not_move_the_namespace():
    fake = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-operator", "namespace": "aaa"}}
    real = {**fake, "metadata": {"name": "gpu-operator", "namespace": "nvidia-gpu-operator"}}
    r = _run([fake, real, _ts_cm("aaa", 8), *_ts_nodes()])
    spec = _spec(r)
    # two candidates and neither is gpu-operator: neither is trusted
    assert "namespace" not in spec["cluster"]["gpuOperator"]
    assert spec["pools"][0]["sharing"] == {"mode": "exclusive"}
    assert any(d.code == "GP965" and "aaa/gpu-operator" in d.message for d in r.diagnostics)


# ----------------------------------------------------------------- 2: gpuplan's claim templates


def _dra_with(*extra):
    snap = snapshot("dra.yaml", REPO / "tests/golden/dra")
    snap["items"] += list(extra)
    return import_cluster(["-"], stdin=dump(snap))


def _rct(ns, name, labels):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpuplan-inference-large", "allocationMode": "ExactCount", "count": 4}}]}}}}


GPUPLAN_LABELS = {"app.kubernetes.io/managed-by": "gpuplan", "app.kubernetes.io/part-of": "dra-platform",
                  "gpuplan.dev/tier": "inference-large"}


def _max_per_pod(r, tier):
    return next(t for t in _spec(r)["tiers"] if t["name"] == tier).get("maxGPUsPerPod")


@pytest.mark.parametrize("ns,labels,why", [
    ("nlp-serve", {"gpuplan.dev/tier": "inference-large"}, "lacks gpuplan's labels"),
    ("aaa-tenant", GPUPLAN_LABELS, "not one gpuplan manages"),
    ("vision-train", GPUPLAN_LABELS, "not granted tier inference-large"),
], ids=["no-managed-by", "unmanaged-namespace", "tier-not-granted"])
def test_forged_claim_template_does_not_set_max_gpus_per_pod(ns, labels, why):
    assert _max_per_pod(_dra_with(), "inference-large") is None
    r = _dra_with(_rct(ns, "gpuplan-inference-large-x4", labels))
    assert _max_per_pod(r, "inference-large") is None
    [w] = [d for d in r.diagnostics if d.code == "GP965"]
    assert f"{ns}/gpuplan-inference-large-x4" in w.message and why in w.message and w.line is not None
    assert _max_per_pod(r, "inference-small") == 2  # gpuplan's own still read


def test_claim_template_one_namespace_forged_with_gpuplans_labels_is_outvoted():
    # nlp-serve is gpuplan's and granted the tier: the labels pass, but vision-serve, also granted
    # it, has only gpuplan-inference-large (1 device), as gpuplan writes in every granted namespace
    r = _dra_with(_rct("nlp-serve", "gpuplan-inference-large-x4", GPUPLAN_LABELS))
    assert _max_per_pod(r, "inference-large") is None
    [w] = [d for d in r.diagnostics if d.code == "GP965"]
    assert "nlp-serve/gpuplan-inference-large-x4" in w.message


def test_fleet_name_is_not_taken_from_a_tenants_labels():
    snap = snapshot("dra.yaml", REPO / "tests/golden/dra")
    for i in range(100):  # more than gpuplan's own labelled objects
        snap["items"].append(_cm(f"spam-{i}", {"a": "b"}, ns="nlp-serve") | {"metadata": {
            "name": f"spam-{i}", "namespace": "nlp-serve",
            "labels": {"app.kubernetes.io/managed-by": "gpuplan", "app.kubernetes.io/part-of": "evil"}}})
    r = import_cluster(["-"], stdin=dump(snap))
    assert yaml.safe_load(r.text)["metadata"]["name"] == "dra-platform"


# ----------------------------------------------------------------- 3: wrong types, named


def _base():
    return [copy.deepcopy(CLUSTER_POLICY), _ts_cm("gpu-operator", 4), *_ts_nodes(),
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
             "spec": {"template": {"spec": {"containers": [{"name": "op", "resources": {"limits": {"cpu": "1"}}}]}}}},
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "burst"},
             "spec": {"template": {"spec": {"requirements": [{"key": "node.kubernetes.io/instance-type",
                                                              "operator": "In", "values": ["p5.48xlarge"]}]}}}}]


def _set(items, kind, path, value):
    o = next(o for o in items if o["kind"] == kind)
    d = o
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return items


@pytest.mark.parametrize("kind,path,value,who,field", [
    ("Node", ("metadata",), ["gpu-1"], "Node (no name)", "metadata"),
    ("Node", ("metadata", "labels"), "nvidia.com/gpu.product=x", "Node gpu-1", "metadata.labels"),
    ("NodePool", ("spec",), 3, "NodePool burst", "spec"),
    ("ConfigMap", ("data", "a100-ts"), 4, "ConfigMap gpu-operator/time-slicing-config", "data.a100-ts"),
    ("Deployment", ("spec", "template", "spec", "containers"), {"name": "op"}, "Deployment gpu-operator/gpu-operator",
     "spec.template.spec.containers"),
    ("Deployment", ("spec", "template", "spec", "containers", 0, "resources", "limits"), ["cpu"],
     "Deployment gpu-operator/gpu-operator", "spec.template.spec.containers[0].resources.limits"),
    ("NodePool", ("spec", "template", "spec", "requirements", 0), None, "NodePool burst",
     "spec.template.spec.requirements[0]"),
    ("ClusterPolicy", ("spec", "devicePlugin", "config", "name"), ["x"], "ClusterPolicy cluster-policy",
     "spec.devicePlugin.config.name"),
    ("ClusterPolicy", ("metadata", "name"), None, "ClusterPolicy (no name)", "metadata.name"),
])
def test_wrong_type_is_a_finding_naming_the_object(kind, path, value, who, field):
    r = _run(_set(_base(), kind, path, value))
    found = [d for d in r.diagnostics if d.code == "GP962" and d.path == field]
    assert found, r.diagnostics
    assert found[0].message.startswith(who + ": ") and "object left out" in found[0].message
    assert found[0].file == "<stdin>" and found[0].line is not None


def test_null_fields_are_absent_fields():
    items = _base()
    _set(items, "Node", ("metadata", "labels", "rack"), None)
    _set(items, "NodePool", ("spec", "template", "spec", "taints"), None)
    r = _run(items)
    assert "GP962" not in _codes(r) and r.text is not None


@pytest.mark.parametrize("doc,want", [
    ({"apiVersion": "v1", "kind": "List", "items": "x"}, "items is a string, not a list"),
    ({"apiVersion": "v1", "kind": "List", "items": [3]}, "items[0] of document 1 is an integer"),
    ([{"kind": "Node"}], "document 1 is a list"),
])
def test_export_that_is_not_a_list_of_objects(doc, want):
    r = import_cluster(["-"], stdin=json.dumps(doc).encode())
    assert r.text is None
    assert any(d.code == "GP962" and want in d.message for d in r.diagnostics), r.diagnostics


# ----------------------------------------------------------------- 4: sizes


def _big_list(n):
    items = [_node(f"gpu-{i:05d}", labels={"gpuplan.dev/pool": "train" if i % 2 else "serve"}) for i in range(n)]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2).encode()


def test_an_8000_node_list_imports(tmp_path):
    raw = _big_list(8000)
    assert 3 * (1 << 20) < len(raw) < MAX_FILE_BYTES
    f = tmp_path / "nodes.json"
    f.write_bytes(raw)
    r = import_cluster([str(f)])
    assert not [d for d in r.diagnostics if d.is_error], r.diagnostics[:3]
    assert sorted(len(p["nodes"]) for p in _spec(r)["pools"]) == [4000, 4000]


def test_a_yaml_list_over_3_mib_imports(tmp_path):
    # one YAML document of 4 MiB (kubectl -o yaml): the API server's request limit is not the export's
    items = [_node(f"gpu-{i}") for i in range(4)]
    for o in items:
        o["metadata"]["annotations"] = {"note": "x" * (1 << 20)}
    f = tmp_path / "nodes.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    f.write_text(yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper, width=1 << 30))
    assert f.stat().st_size > 4 * (1 << 20)
    r = import_cluster([str(f)])
    assert not [d for d in r.diagnostics if d.is_error], r.diagnostics[:3]
    assert len(_spec(r)["pools"][0]["nodes"]) == 4


def _padded(limit: int) -> bytes:
    raw = json.dumps({"apiVersion": "v1", "kind": "List", "items": [_node("gpu-1")]}).encode()
    return raw + b" " * (limit - len(raw))


def test_file_limit_is_exactly_16_mib(tmp_path):
    f = tmp_path / "cluster.json"
    f.write_bytes(_padded(MAX_FILE_BYTES))
    assert MAX_FILE_BYTES == 16 * (1 << 20)
    r = import_cluster([str(f)])
    assert r.text is not None and not [d for d in r.diagnostics if d.is_error]
    f.write_bytes(_padded(MAX_FILE_BYTES) + b" ")
    r = import_cluster([str(f)])
    assert r.text is None
    [d] = r.diagnostics
    assert d.code == "GP007" and "16 MiB" in d.message and d.file == str(f.as_posix())


def test_stdin_limit_is_exactly_64_mib():
    assert MAX_STDIN_BYTES == 64 * (1 << 20)
    r = import_cluster(["-"], stdin=_padded(MAX_STDIN_BYTES))
    assert r.text is not None and not [d for d in r.diagnostics if d.is_error]
    r = import_cluster(["-"], stdin=_padded(MAX_STDIN_BYTES) + b" ")
    assert r.text is None
    [d] = r.diagnostics
    assert d.code == "GP007" and "64 MiB" in d.message and d.file == "<stdin>"


# ----------------------------------------------------------------- 5: ambiguous scalars

AMBIGUOUS = ["yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "OFF", "true", "False", "null", "Null", "~", "",
             "010", "0x1F", "0o17", "0b101", "1e3", "1E3", "1_000", "1:20", "+1", "-0", "1.", ".inf", "-.inf", ".nan",
             "2001-12-14", "=", "<<"]


def _loaders():
    from ruamel.yaml import YAML

    y11 = YAML(typ="safe", pure=True)
    y11.version = (1, 1)
    y12 = YAML(typ="safe", pure=True)
    return {"pyyaml": yaml.safe_load, "ruamel-1.1": lambda t: y11.load(io.StringIO(t)),
            "ruamel-1.2": lambda t: YAML(typ="safe", pure=True).load(io.StringIO(t))}


def test_ambiguous_strings_are_quoted_for_every_yaml_reader():
    from gpuplan.importer.emit import render
    from gpuplan.importer.infer import Draft

    spec = {"keys": {s: s for s in AMBIGUOUS}, "values": list(AMBIGUOUS), "plain": "gpu-1"}
    text = render(Draft(spec=spec))
    for name, load in _loaders().items():
        assert load(text) == spec, name
    assert "plain: gpu-1\n" in text  # only what needs it is quoted


def test_ambiguous_names_from_the_cluster_round_trip():
    # valid label keys and values, namespace and tenant names that YAML 1.1 reads as booleans or numbers
    words = ["yes", "no", "on", "off", "y", "n", "true", "null", "010", "0x1f", "1e3", "1_000"]
    labels = {w: w for w in words if not w.startswith("1_")} | {"rack": "1_000"}
    nodes = [_node(f"gpu-{i}", labels={"gpuplan.dev/pool": "on", **labels}) for i in (1, 2)]
    spaces = [_ns(w, {"gpuplan.dev/tenant": "yes" if w != "n" else "off"}) for w in ("no", "010", "n")]
    r = _run([*nodes, *spaces])
    for name, load in _loaders().items():
        spec = load(r.text)["spec"]
        [pool] = spec["pools"]
        assert pool["name"] == "on" and pool["labels"] == dict(sorted(labels.items())), name
        assert {t["name"]: t["namespaces"] for t in spec["tenants"]} == {"off": ["n"], "yes": ["010", "no"]}, name
    assert "GP961" not in _codes(r), r.diagnostics


def test_lone_surrogates_from_a_library_caller_are_written_escaped():
    # the readers refuse them (JSON escapes go to the YAML reader, which refuses them); objects a
    # caller builds may still hold one, and it reaches the draft's values and comments
    from gpuplan.importer.pipeline import import_objects
    from gpuplan.importer.read import Obj

    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 10,
          "metadata": {"name": "gpu\ud800", "labels": {"gpuplan.dev/tier": "train"}}, "description": "bad \udfff"}
    items = [pc, _node("gpu-1", labels={"gpuplan.dev/pool": "train"}), _ns("team-a"),
             _quota("team-a", "q", {"requests.nvidia.com/gpu": "1"}, scope="gpu\ud800")]
    r = import_objects([Obj(d, "<test>", None) for d in items])
    text = r.text.encode("utf-8").decode("utf-8")
    assert "priorityClassName: gpu\\ud800" in text and "from PriorityClass gpu\\ud800" in text
    r = import_cluster(["-"], stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode())
    assert r.text is None and any(d.code == "GP830" for d in r.diagnostics)


# ----------------------------------------------------------------- 2b: chart Applications


def test_a_tenants_chart_application_is_not_the_fleets_delivery():
    """Argo CD reconciles Applications in its own namespace only: one a tenant writes into its
    namespace (sorting first) sets neither the driver version nor the GitOps repository."""
    snap = snapshot("dra.yaml", REPO / "tests/golden/dra")
    [app] = [o for o in snap["items"] if o["kind"] == "Application" and "dra-driver" in o["metadata"]["name"]]
    forged = copy.deepcopy(app)
    forged["metadata"]["namespace"] = "aaa-tenant"
    for s in forged["spec"].get("sources") or [forged["spec"]["source"]]:
        if "targetRevision" in s and "chart" in s:
            s["targetRevision"] = "v9.9.9"
        if s.get("ref") == "values":
            s["repoURL"] = "https://evil.example/fleet.git"
    snap["items"].append(forged)
    r = import_cluster(["-"], stdin=dump(snap))
    spec = _spec(r)
    assert spec["cluster"]["allocation"] == {"draDriverVersion": "v0.5.0"}
    assert "evil.example" not in r.text
    [w] = [d for d in r.diagnostics if d.code == "GP965"]
    assert "aaa-tenant/" in w.message and w.line is not None
