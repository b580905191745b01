"""The `monitoring` rules (GP660, GP661) and the Prometheus Operator CRD conversion."""

from __future__ import annotations

import json

import jsonschema

from gpuplan.compiler import check_fleet
from gpuplan.upstream.refresh_monitoring import CRDS, OUT, crd_schema, python_pattern
from tests.outputkit import fleet

POOL = """\
  pools:
    - name: a
      gpu: A100-SXM4-80GB
      gpusPerNode: 2
      nodes: [n1]
{price}
"""


def codes(tmp_path, body: str, dcgm: str = "") -> list[tuple[str, str | None]]:
    text = fleet(body)
    if dcgm:
        text = text.replace('    gitops:', f'    gpuOperator: {{dcgmExporter: {dcgm}}}\n    gitops:')
    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    return sorted((d.code, d.path) for d in check_fleet(p).diagnostics if d.code.startswith("GP66"))


def test_monitoring_without_dcgm_scrape_is_an_error(tmp_path):
    body = POOL.format(price="      pricePerGPUHour: 1.5") + "  monitoring: {release: prom}\n"
    assert codes(tmp_path, body) == []
    assert codes(tmp_path, body, "{serviceMonitor: false}") == [("GP660", "spec.monitoring")]
    assert codes(tmp_path, body, "{enabled: false}") == [("GP660", "spec.monitoring")]
    # without monitoring, no opinion
    assert codes(tmp_path, POOL.format(price=""), "{enabled: false}") == []


def test_unpriced_pool_is_noted_only_with_monitoring(tmp_path):
    assert codes(tmp_path, POOL.format(price="") + "  monitoring: {}\n") == [("GP661", "spec.pools[0]")]
    assert codes(tmp_path, POOL.format(price="")) == []


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "spec": {"group": "example.com", "names": {"kind": "Widget"}, "versions": [{"name": "v1", "schema": {
        "openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "mode": {"type": "string", "pattern": "^(?i)(abort|warn)?$"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            }},
        }}}}]},
}


def test_crd_conversion_is_strict_where_the_api_server_is():
    schema = crd_schema(CRD)
    v = jsonschema.Draft202012Validator(schema)
    ok = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
          "spec": {"port": "http", "mode": "WARN", "free": {"anything": 1, "inner": {"y": 2}}}}
    assert list(v.iter_errors(ok)) == []
    for bad in ({**ok, "spec": {**ok["spec"], "typo": 1}},          # unknown field
                {**ok, "spec": {**ok["spec"], "port": 1.5}},        # int-or-string
                {**ok, "spec": {**ok["spec"], "mode": "retry"}},    # pattern, case-insensitive in Go too
                {**ok, "kind": "Gadget"}):
        assert list(v.iter_errors(bad)), bad
    assert python_pattern("^(?i)(abort|warn)?$") == "(?i)^(abort|warn)?$"


def test_pinned_schemas_are_there_and_valid():
    for kind in CRDS:
        schema = json.loads((OUT / f"{kind.lower()}_v1.json").read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["kind"]["enum"] == [kind]
        assert schema["additionalProperties"] is False


def test_missing_promtool_fails_instead_of_skipping(monkeypatch):
    import pytest

    from tests.monitoring import promkit

    monkeypatch.setattr(promkit.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="promtool is not installed"):
        promkit.promtool()
