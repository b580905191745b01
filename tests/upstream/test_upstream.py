"""The pinned upstream material inside the package: complete, traceable,
consistent, and the only copy the program and the tests read."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from jsonschema import Draft202012Validator
from tests.conftest import REPO

from gpuplan.upstream import pins as upstream
from gpuplan.upstream import refresh

SRC = upstream.sources()


def test_every_pinned_crd_names_its_source():
    pinned = {(e["apiVersion"].rpartition("/")[0], e["kind"], e["apiVersion"].rpartition("/")[2]) for e in SRC["crds"]}
    assert set(refresh.TARGETS) <= pinned
    assert ("monitoring.coreos.com", "PrometheusRule", "v1") in pinned  # pinned by refresh_monitoring
    for e in SRC["crds"]:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", e["repository"]), e
        assert e["tag"].startswith("v") and re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e
        assert e["path"].endswith(".yaml"), e
        assert (upstream.ROOT / e["schema"]).is_file() and (upstream.ROOT / e["cel"]).is_file()


def test_only_listed_files_are_shipped():
    listed = {e["schema"] for e in SRC["crds"]} | {e["cel"] for e in SRC["crds"]}
    shipped = {p.relative_to(upstream.ROOT).as_posix() for d in ("crds", "cel")
               for p in (upstream.ROOT / d).rglob("*") if p.is_file()}
    assert shipped == listed
    size = sum((upstream.ROOT / f).stat().st_size for f in shipped)
    # every provisioning back-end adds its kinds (GKE, AKS, Cluster API: about 60 kB together), and
    # every version a pinned release still serves has its own schema (Kueue, Cluster API and
    # AKSNodeClass deprecated versions: about 140 kB), and Kueue's admission-check kinds that its own
    # setups write beside the queues (MultiKueue, ProvisioningRequestConfig: about 40 kB), and the ten
    # versions Azure Service Operator serves of ManagedClustersAgentPool (about 150 kB), and Volcano's
    # Queue, PodGroup and Job (about 85 kB, the Job's pod template most of it)
    assert size < 910_000, f"pinned schemas take {size} bytes: ship only what gpuplan targets"


@pytest.mark.slow
@pytest.mark.parametrize("group,kind,version", upstream.crd_kinds(), ids=lambda x: str(x))
def test_schema_is_valid_and_its_cel_list_matches_it(group, kind, version):
    schema = upstream.crd_schema(group, kind, version)
    Draft202012Validator.check_schema(schema)
    if (group, kind, version) in refresh.TARGETS:
        assert not list(_text_descriptions(schema))  # stripped (a field may still be *named* description)
    inline = []

    def walk(node, path):
        if isinstance(node, dict):
            for r in node.get("x-kubernetes-validations", []):
                inline.append((path, r["rule"], r["message"]))
            for k, v in node.get("properties", {}).items():
                walk(v, f"{path}.{k}")
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    walk(node[key], f"{path}[*]")

    walk(schema, "$")
    listed = [(r["path"], r["rule"], r["message"]) for r in upstream.cel_rules(group, kind, version)]
    assert sorted(inline) == sorted(listed)


def _text_descriptions(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                yield v
            yield from _text_descriptions(v)
    elif isinstance(node, list):
        for v in node:
            yield from _text_descriptions(v)


def test_sources_md_is_rendered_from_sources_json():
    text = (upstream.ROOT / "SOURCES.md").read_text(encoding="utf-8")
    assert text == refresh.render_markdown(SRC["crds"], SRC["hardware"])


def test_hardware_files_match_their_recorded_digest():
    for h in SRC["hardware"]:
        path = REPO / h["file"]
        assert path.is_file(), h
        if "sha256" in h:
            assert hashlib.sha256(path.read_bytes()).hexdigest() == h["sha256"], h["file"]
        else:  # gpus.json records the digest of its own input
            assert json.loads(path.read_text())["reference"]["sha256"] == h["sha256_of_input"]


def test_strip_descriptions_keeps_fields_named_description():
    schema = {"description": "x", "properties": {"description": {"type": "string", "description": "y"},
                                                  "a": {"description": "z", "type": "integer"}}}
    assert refresh.strip_descriptions(schema) == {"properties": {"description": {"type": "string"},
                                                                 "a": {"type": "integer"}}}


def test_sources_table_parser():
    row = ("| nodepool-karpenter-v1.json | karpenter.sh/v1 NodePool | True | True | False | 20 | "
           "aws/karpenter-provider-aws | v1.14.1 | bde00654cd316fddb3dccfba3f5ac07039865429 "
           "(2026-08-20T15:21:29-07:00) | pkg/apis/crds/karpenter.sh_nodepools.yaml |")
    got = refresh.parse_sources("| file | apiVersion / kind |\n|---|---|\n" + row)
    assert got["karpenter.sh/v1 NodePool"]["commit"] == "bde00654cd316fddb3dccfba3f5ac07039865429"
    assert got["karpenter.sh/v1 NodePool"]["tag"] == "v1.14.1"


def test_nothing_outside_the_refresh_scripts_reads_the_reference_directory():
    """Users clone gpuplan alone: the program and its tests never open the reference
    directory that sits beside the repository on development machines."""
    allowed = {"gpuplan/upstream/refresh.py", "gpuplan/catalog/build_catalog.py",
               "tests/upstream/test_upstream.py"}
    offenders = []
    for p in sorted(list((REPO / "gpuplan").rglob("*.py")) + list((REPO / "tests").rglob("*.py"))
                    + list((REPO / "benchmarks").rglob("*.py"))):
        rel = p.relative_to(REPO).as_posix()
        if rel in allowed:
            continue
        text = p.read_text(encoding="utf-8")
        if re.search(r"""["'/]shared["'/]""", text) or "shared" + "/reference" in text:
            offenders.append(rel)
    assert not offenders
