"""Every generated object validates against its upstream schema.

CRDs: ``../shared/reference/k8s/schemas/catalog-strict/<group>/<kind>_<version>.json``
(strict: unknown fields are errors) with jsonschema; core kinds with
``kubernetes_validate`` (strict, Kubernetes 1.33)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
from tests.outputkit import REPO, all_objects

SHARED = REPO.parent / "shared"
CATALOG = SHARED / "reference" / "k8s" / "schemas" / "catalog-strict"
K8S_VERSION = "1.33.0"


def catalog() -> Path:
    if not CATALOG.is_dir():
        pytest.fail(f"CRD schemas missing at {CATALOG}: the shared reference must sit beside the repo "
                    "(CI has it)")
    return CATALOG


@lru_cache(maxsize=None)
def _validator(path: str):
    schema = json.loads(Path(path).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


PACKAGED = REPO / "gpuplan" / "upstream" / "crds"


def crd_schema_path(obj: dict) -> Path | None:
    """The strict CRD schema, or None for kinds Kubernetes itself serves (no catalog
    entry for the group); an unknown CRD then fails in kubernetes_validate."""
    group, _, version = obj["apiVersion"].rpartition("/")
    if group and (PACKAGED / group).is_dir():
        return PACKAGED / group / f"{obj['kind'].lower()}_{version}.json"
    if not group or not (catalog() / group).is_dir():
        return None
    return catalog() / group / f"{obj['kind'].lower()}_{version}.json"


def validate(obj: dict, k8s_version: str = K8S_VERSION) -> None:
    path = crd_schema_path(obj)
    if path is None:
        kubernetes_validate.validate(obj, k8s_version, strict=True)
        return
    assert path.is_file(), f"no schema for {obj['apiVersion']} {obj['kind']} at {path}"
    errors = sorted(_validator(str(path)).iter_errors(obj), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_every_object_validates(examples, example):
    objs = all_objects(examples[example])
    kinds = set()
    for path, obj in objs:
        try:
            validate(obj)
        except Exception as exc:  # noqa: BLE001 - name the file in the failure
            pytest.fail(f"{path}: {obj['kind']} {obj['metadata'].get('name')}: {exc}")
        kinds.add(obj["kind"])
    must = {"Namespace", "PriorityClass", "ResourceQuota", "ConfigMap", "NodeFeatureRule"}
    must |= {"Application", "PrometheusRule"} if example == "argocd" else {"Kustomization", "HelmRepository", "HelmRelease"}
    assert must <= kinds, must - kinds


def test_validation_catches_a_bad_object():
    """The validators are live: a wrong field or type, or an unknown kind, fails."""
    with pytest.raises(Exception):
        validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}})
    with pytest.raises(Exception):
        validate({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "x"}, "spec": {"value": 1}})
    with pytest.raises(AssertionError):
        validate({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
                  "metadata": {"name": "x"}, "spec": {"rules": [{"name": "r", "taint": []}]}})
    with pytest.raises(AssertionError):
        validate({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "x"},
                  "spec": {"project": "default", "destination": {}, "syncPolicy": {"automated": {"prune": "yes"}}}})


def test_root_kustomizations_are_kustomize_objects(examples):
    for c in examples.values():
        for path, data in c.files.items():
            if path.endswith("kustomization.yaml"):
                import yaml

                [k] = [d for d in yaml.safe_load_all(data) if d]
                assert set(k) == {"apiVersion", "kind", "resources"}, path
                assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and k["kind"] == "Kustomization"


ALL_EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("spec", ALL_EXAMPLES, ids=lambda p: p.name)
def test_every_example_in_the_repo_validates(spec):
    from tests.outputkit import compile_ok

    compiled = compile_ok(spec)
    objs = all_objects(compiled)
    assert objs
    # core kinds at the example's own Kubernetes version (DRA's resource.k8s.io/v1 exists from 1.34)
    version = compiled.resolved.fleet.spec.cluster.kubernetes_version + ".0"
    for path, obj in objs:
        try:
            validate(obj, version)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{spec.name}: {path}: {obj['kind']} {obj['metadata'].get('name')}: {exc}")
