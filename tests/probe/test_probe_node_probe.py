"""node-probe/: manifests valid in strict Kubernetes schemas, and the
DaemonSet keeps the promises its README makes."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from probe_support import REPO, fixture_path

NODE_PROBE = REPO / "node-probe"
K8S = "1.33.0"


def _docs():
    out = []
    for path in sorted(NODE_PROBE.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _kind(kind, name=None):
    found = [d for _, d in _docs() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name)
    return found[0]


@pytest.mark.parametrize("doc", [d for _, d in _docs()], ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_validates_strictly(doc):
    kubernetes_validate.validate(doc, K8S, strict=True)


def test_strict_validation_would_catch_a_typo():
    ds = copy.deepcopy(_kind("DaemonSet"))
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, K8S, strict=True)


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load((NODE_PROBE / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(p.name for p in NODE_PROBE.glob("*.yaml") if p.name != "kustomization.yaml")


def test_daemonset_runs_unprivileged_on_gpu_nodes_without_taking_a_gpu():
    ds = _kind("DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["runtimeClassName"] == "nvidia"
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    assert keys == {"nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod["tolerations"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert "NODE_NAME" in env
    res = c["resources"]
    assert not any("nvidia.com" in k for part in res.values() for k in part), "must not request a GPU"
    assert set(res["requests"]) == {"cpu", "memory"} and set(res["limits"]) == {"cpu", "memory"}
    sc, psc = c["securityContext"], pod["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]} and "privileged" not in sc
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "--publish=configmap" in c["args"]


def test_rbac_is_minimal():
    role = _kind("Role", "gpuplan-node-probe")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]}]
    # no cluster-wide rights at all for the pods on every node
    assert not [d for _, d in _docs() if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    reader = _kind("Role", "gpuplan-inventory-reader")
    assert reader["rules"][0]["verbs"] == ["get", "list"]
    all_verbs = {v for r in role["rules"] for v in r["verbs"]}
    assert not all_verbs & {"delete", "deletecollection", "list", "watch", "update", "*"}


def test_admission_policy_ties_writes_to_the_pods_node():
    vap = _kind("ValidatingAdmissionPolicy")
    exprs = " ".join(v["expression"] for v in vap["spec"]["validations"])
    assert "authentication.kubernetes.io/node-name" in json.dumps(vap)
    assert "'inventory-' + variables.node" in exprs and "gpuplan.dev/node" in exprs
    binding = _kind("ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == vap["metadata"]["name"] and binding["spec"]["validationActions"] == ["Deny"]


def test_dockerfile():
    text = (NODE_PROBE / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG BASE=(\S+)$", text, re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base), base
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${BASE}", "${BASE}"]  # every stage on the pinned digest
    assert re.search(r'^ENTRYPOINT \["gpuplan", "probe"\]$', text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and not user[-1].startswith("0") and user[-1] != "root"
    assert "--no-index" in text and "--no-build-isolation" in text
    # every pip command that fetches or installs wheels checks their hashes
    pip_cmds = [c for c in re.split(r"&&|RUN", text.replace("\\\n", " ")) if re.search(r"pip (install|download)", c)]
    for c in pip_cmds:
        assert "--require-hashes" in c or "--no-deps /wheels/gpuplan-" in c, c
    assert "pip wheel" in text and not re.search(r'pip wheel[^\n]*"pydantic', text)


def _lock(name):
    out = {}
    text = (NODE_PROBE / name).read_text()
    for block in re.split(r"\n(?=\S)", "\n".join(l for l in text.splitlines() if not l.startswith("#"))):
        m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if m:
            out[m.group(1).lower()] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return out


def test_wheels_are_pinned_by_version_and_hash():
    run = _lock("requirements.lock")
    assert set(run) == {"pydantic", "pydantic-core", "annotated-types", "typing-extensions", "typing-inspection",
                        "ruamel.yaml", "ruamel.yaml.clib", "click", "pyyaml", "nvidia-ml-py"}
    build = _lock("build-requirements.lock")
    assert set(build) == {"setuptools", "wheel"}
    for name, (version, hashes) in {**run, **build}.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.]*", version) and hashes, name
    # compiled packages carry a wheel for each architecture the image is built for
    for name in ("pydantic-core", "ruamel.yaml.clib", "pyyaml"):
        assert len(run[name][1]) == 2, name


def test_daemonset_image_is_pinned_by_digest():
    k = yaml.safe_load((NODE_PROBE / "kustomization.yaml").read_text())
    (img,) = k["images"]
    assert img["name"] == _kind("DaemonSet")["spec"]["template"]["spec"]["containers"][0]["image"].split(":")[0]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", img["digest"]) and "newTag" not in img


ALLOWED = {"gpuplan", "pydantic", "pydantic_core", "annotated_types", "typing_extensions",
           "typing_inspection", "yaml", "_yaml", "ruamel", "_ruamel_yaml", "click", "pynvml"}
# the distribution in requirements.lock that provides each module above
LOCKED = {"pydantic": "pydantic", "pydantic_core": "pydantic-core", "annotated_types": "annotated-types",
          "typing_extensions": "typing-extensions", "typing_inspection": "typing-inspection", "yaml": "pyyaml",
          "_yaml": "pyyaml", "ruamel": "ruamel.yaml", "_ruamel_yaml": "ruamel.yaml.clib", "click": "click",
          "pynvml": "nvidia-ml-py"}


def test_probe_path_imports_only_what_the_image_installs():
    """The Dockerfile installs gpuplan --no-deps plus pydantic, ruamel.yaml,
    click, PyYAML, nvidia-ml-py: the probe must not need anything else."""
    code = (
        "import sys, runpy\n"
        "before = set(sys.modules)\n"
        "sys.argv = ['gpuplan', 'probe', '--fake', sys.argv[1]]\n"
        "try:\n    runpy.run_module('gpuplan', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "import gpuplan.probe.publish, gpuplan.cli.probe\n"
        "std = set(sys.stdlib_module_names)\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(m for m in new - std if not m.startswith('_') and m != 'cython_runtime'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(fixture_path("a100-mig"))], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    third_party = set(eval(r.stdout.strip().splitlines()[-1]))
    assert third_party - ALLOWED == set(), r.stderr
    assert {LOCKED[m] for m in third_party - {"gpuplan"}} <= set(_lock("requirements.lock"))
    assert "pydantic" in third_party and "scipy" not in third_party and "highspy" not in third_party
