"""Names and values that YAML readers like to reinterpret come back as the same strings.

Every written YAML file (and the YAML payloads inside ConfigMaps) is parsed by
ruamel.yaml (YAML 1.2) and PyYAML ``safe_load`` (YAML 1.1); both must give
back exactly the data the lowering produced."""

from __future__ import annotations

import io

import pytest
import yaml
from ruamel.yaml import YAML

from gpuplan.lower.driver import lower_all

HOSTILE_VALUES = ["on", "off", "yes", "no", "y", "n", "012", "1e3", "0x1F", "true", "null", "1_000", "1.0"]

SPEC = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: "yes"}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops:
      engine: ENGINE
      repoURL: "ssh://git@git.example.com:2222/on/off:#x?y=1&z.git"
      revision: "012"
      path: "on"
    gpuOperator: {namespace: "off"}
  pools:
    - name: "y"
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: ["on", "1e3"]
      sharing: {mode: mig, layout: {3g.40gb: 2}}
      taints:
        - {key: "example.com/no", value: "yes", effect: NoSchedule}
      labels:
LABELS
    - name: "0x1f"
      gpu: L40S
      gpusPerNode: 2
      nodes: ["012"]
      sharing: {mode: time-slicing, replicas: 2}
  tiers:
    - {name: "n", pool: "y", profile: 3g.40gb, description: "on: #{{ x }} | <b>yes</b>", enforcePriority: true}
    - {name: "true", pool: "0x1f", description: "12:30"}
  tenants:
    - name: "no"
      namespaces: ["on", "null"]
      labels: {"example.com/off": "off"}
      quotas:
        "on": {"n": 1, "true": 2}
"""


def _labels() -> str:
    return "".join(f'        "example.com/v{i}": "{v}"\n' for i, v in enumerate(HOSTILE_VALUES))


def _spec(engine: str) -> str:
    return SPEC.replace("ENGINE", engine).replace("LABELS\n", _labels())


def _ruamel(text: str) -> list:
    y = YAML(typ="safe", pure=True)
    return [d for d in y.load_all(io.StringIO(text)) if d is not None]


def _pyyaml(text: str) -> list:
    return [d for d in yaml.safe_load_all(text) if d is not None]


@pytest.fixture(params=["argocd", "flux"])
def hostile(request, build):
    return build(_spec(request.param))


def test_files_read_back_identically_in_yaml_1_1_and_1_2(hostile):
    expected = {a.path: list(a.documents) for a in lower_all(hostile.resolved) if a.documents is not None}
    assert expected
    for path, docs in expected.items():
        text = hostile.files[path].decode("utf-8")
        assert _ruamel(text) == docs, f"{path}: YAML 1.2 reads something else"
        assert _pyyaml(text) == docs, f"{path}: YAML 1.1 reads something else"


def test_embedded_payloads_read_back_identically(hostile):
    for path in ("gpu-operator/device-plugin-config.yaml", "gpu-operator/mig-parted-config.yaml"):
        [cm] = _pyyaml(hostile.files[path].decode())
        for key, text in cm["data"].items():
            assert _ruamel(text) == _pyyaml(text), (path, key)


def test_hostile_strings_survive(hostile):
    files = {p: d.decode() for p, d in hostile.files.items()}
    [nfr] = _pyyaml(files["pools/y/node-labels.yaml"])
    labels = nfr["spec"]["rules"][0]["labels"]
    for i, v in enumerate(HOSTILE_VALUES):
        assert labels[f"example.com/v{i}"] == v
        assert _ruamel(files["pools/y/node-labels.yaml"])[0]["spec"]["rules"][0]["labels"][f"example.com/v{i}"] == v
    assert nfr["spec"]["rules"][0]["matchFeatures"][0]["matchExpressions"]["nodename"]["value"] == ["on", "1e3"]
    pcs = {p["metadata"]["name"]: p for p in _pyyaml(files.get("cluster/priorityclasses.yaml")
                                                      or files["delivery/priorityclasses/priorityclasses.yaml"])}
    assert pcs["gpuplan-n"]["description"] == "on: #{{ x }} | <b>yes</b>"
    assert pcs["gpuplan-true"]["description"] == "12:30"
    nss = {n["metadata"]["name"]: n for n in _pyyaml(files["tenants/no/namespaces.yaml"])}
    assert set(nss) == {"on", "null"}
    assert nss["on"]["metadata"]["labels"]["gpuplan.dev/tenant"] == "no"
    assert nss["on"]["metadata"]["labels"]["example.com/off"] == "off"
    quotas = _pyyaml(files["tenants/no/resourcequotas.yaml"])
    assert {q["metadata"]["namespace"] for q in quotas} == {"on", "null"}
    values = _pyyaml(files["gpu-operator/values.yaml"])[0]
    assert {"key": "example.com/no", "operator": "Exists", "effect": "NoSchedule"} in values["daemonsets"]["tolerations"]
    [plugin] = _pyyaml(files["gpu-operator/device-plugin-config.yaml"])
    assert plugin["metadata"]["namespace"] == "off"
    # pool keys are <pool>-<hash of the config> (content-addressed)
    assert {k if k == "gpuplan.default" else k.rsplit("-", 1)[0] for k in plugin["data"]} == {
        "gpuplan.default", "y", "0x1f"}


def test_readme_keeps_hostile_text_inert(hostile):
    text = hostile.files["README.md"].decode()
    # the repo URL, verbatim: spec text is never evaluated as a template
    assert "ssh://git@git.example.com:2222/on/off:#x?y=1&z.git" in text
    assert "| y |" in text and "| 0x1f |" in text


def test_markdown_cells_are_escaped():
    from gpuplan.lower.common import cell

    assert cell("a|b\nc<d>`e`") == "a\\|b c&lt;d&gt;'e'"


def test_delivery_keeps_hostile_strings(hostile):
    files = {p: d.decode() for p, d in hostile.files.items()}
    if hostile.resolved.fleet.spec.cluster.gitops.engine == "argocd":
        admin, project_app, root = _pyyaml(files["delivery/bootstrap.yaml"])
        [project] = _pyyaml(files["delivery/project/appproject.yaml"])
        assert project["kind"] == "AppProject" and admin["kind"] == "AppProject"
        assert admin["spec"]["sourceRepos"] == ["ssh://git@git.example.com:2222/on/off:#x?y=1&z.git"]
        assert project_app["spec"]["source"]["path"] == "on/delivery/project"
        assert "ssh://git@git.example.com:2222/on/off:#x?y=1&z.git" in project["spec"]["sourceRepos"]
        assert root["spec"]["source"] == {
            "repoURL": "ssh://git@git.example.com:2222/on/off:#x?y=1&z.git", "targetRevision": "012", "path": "on"}
        [op] = _pyyaml(files["delivery/gpu-operator.yaml"])
        assert op["spec"]["sources"][0]["helm"]["valueFiles"] == ["$values/on/gpu-operator/values.yaml"]
    else:
        ks = _pyyaml(files["delivery/bootstrap.yaml"])
        assert [k["spec"]["path"] for k in ks] == ["./on/delivery/gpu-operator", "./on"]
