"""What the monitoring target emits, checked against what consumes it:

- PrometheusRule and the DCGM exporter's ServiceMonitor against the pinned
  Prometheus Operator CRD schemas (strict);
- the labels kube-prometheus-stack's Prometheus and Grafana sidecar select on;
- the dashboard: Grafana's dashboard schema (through grafana-foundation-sdk's
  generated model), every panel's datasource and every query (parsed by promtool);
- a spec without ``monitoring`` compiles exactly as before."""

from __future__ import annotations

import json
import re
from functools import lru_cache
import jsonschema
import pytest
import yaml

from gpuplan.lower.monitoring import ALERTS, DASHBOARD_PATH, RUNBOOK, STACK_VALUES
from tests.monitoring.promkit import run_promtool
from tests.outputkit import EXAMPLES, REPO, compile_ok, docs, one

CRDS = REPO / "gpuplan" / "upstream" / "crds" / "monitoring.coreos.com"
# NVIDIA/gpu-operator v26.7.0 assets/state-dcgm-exporter/0500_service_monitor.yaml
OPERATOR_SERVICE_MONITOR = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "ServiceMonitor",
    "metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "labels": {"app": "nvidia-dcgm-exporter"}},
    "spec": {
        "endpoints": [{"port": "gpu-metrics", "path": "/metrics"}],
        "jobLabel": "app",
        "namespaceSelector": {"matchNames": ["gpu-operator"]},
        "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
    },
}


@lru_cache(maxsize=None)
def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((CRDS / f"{kind.lower()}_v1.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(obj: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator(obj["kind"]).iter_errors(obj)]


def operator_service_monitor(sm_values: dict) -> dict:
    """The ServiceMonitor the GPU Operator creates from its asset and these values
    (``applyServiceMonitorCustomEdits``, controllers/object_controls.go line 4974 at v26.7.0)."""
    obj = json.loads(json.dumps(OPERATOR_SERVICE_MONITOR))
    obj["metadata"]["labels"].update(sm_values.get("additionalLabels") or {})
    ep = obj["spec"]["endpoints"][0]
    if sm_values.get("interval"):
        ep["interval"] = sm_values["interval"]
    if sm_values.get("scrapeTimeout"):
        ep["scrapeTimeout"] = sm_values["scrapeTimeout"]
    if "honorLabels" in sm_values:
        ep["honorLabels"] = sm_values["honorLabels"]
    if sm_values.get("relabelings") is not None:
        ep["relabelings"] = sm_values["relabelings"]
    return obj


@pytest.fixture(scope="module")
def compiled():
    return compile_ok(EXAMPLES["argocd"])


def monitoring_objects(c) -> list[tuple[str, dict]]:
    return [(p, d) for p, data in sorted(c.files.items())
            if p.startswith("monitoring/") and p.endswith(".yaml") and p != STACK_VALUES for d in docs(data)]


def test_prometheus_rules_pass_the_strict_crd_schema(compiled):
    rules = [(p, d) for p, d in monitoring_objects(compiled) if d["kind"] == "PrometheusRule"]
    assert rules
    for path, d in rules:
        assert not errors(d), (path, errors(d))


def test_schema_is_strict():
    bad = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": {"name": "x"},
           "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "fro": "5m"}]}]}}
    assert any("fro" in e for e in errors(bad))
    bad["spec"]["groups"][0]["rules"][0] = {"alert": "A", "expr": "up", "for": "five minutes"}
    assert errors(bad)


def test_dcgm_service_monitor_is_valid_and_selected_by_the_stack(compiled):
    rf = compiled.resolved
    values = one(compiled, "gpu-operator/values.yaml")
    sm = operator_service_monitor(values["dcgmExporter"]["serviceMonitor"])
    assert not errors(sm), errors(sm)
    # kube-prometheus-stack's Prometheus: serviceMonitorSelector.matchLabels.release = <release>
    assert sm["metadata"]["labels"]["release"] == rf.fleet.spec.monitoring.release
    # every rule joins DCGM series to nodes on `node`: the relabeling must produce it
    [relabel] = sm["spec"]["endpoints"][0]["relabelings"]
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_node_name"] and relabel["targetLabel"] == "node"


def test_rules_and_dashboard_carry_the_selected_labels(compiled):
    rf = compiled.resolved
    m = rf.fleet.spec.monitoring
    for path, d in monitoring_objects(compiled):
        labels = d["metadata"]["labels"]
        if d["kind"] == "PrometheusRule":
            assert labels["release"] == m.release, path
        else:
            assert d["kind"] == "ConfigMap" and labels[m.dashboard_label] == "1", path


def test_stack_values_allow_list_every_label_the_rules_and_dashboard_read(compiled):
    from gpuplan.lower.monitoring import ksm_name

    values = one(compiled, STACK_VALUES)
    allowed = set()
    for entry in values["kube-state-metrics"]["metricLabelsAllowlist"]:
        kind, keys = re.fullmatch(r"(nodes|namespaces)=\[(.*)\]", entry).groups()
        allowed |= {(kind, "label_" + ksm_name(k)) for k in keys.split(",")}
    exprs = [r["expr"] for _, d in monitoring_objects(compiled) if d["kind"] == "PrometheusRule"
             for g in d["spec"]["groups"] for r in g["rules"]]
    exprs += [t["expr"] for p in dashboard_json(compiled)["panels"] for t in p.get("targets", [])]
    used = set()
    for e in exprs:
        for metric, body in re.findall(r"kube_(node|namespace)_labels\{([^}]*)\}", e):
            used |= {(metric + "s", lab) for lab in re.findall(r"\b(label_[a-z0-9_]+)\s*[=!]", body)}
    assert used == allowed


# --- dashboard -----------------------------------------------------------------------


def dashboard_json(c) -> dict:
    [cm] = docs(c.files[DASHBOARD_PATH])
    [(name, body)] = cm["data"].items()
    assert name.endswith(".json")
    return json.loads(body)


def test_dashboard_panels_have_datasource_and_valid_queries(compiled, tmp_path):
    rf = compiled.resolved
    dash = dashboard_json(compiled)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ds = {"type": "prometheus", "uid": "${datasource}"}
    # a row per pool and per tenant: rows repeated over variables holding every pool / tenant
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    assert [(r["title"], r["repeat"]) for r in rows] == [("Pool $pool", "pool"), ("Tenant $tenant", "tenant")]
    assert variables["pool"]["query"].split(",") == [p.name for p in rf.pools]
    assert variables["tenant"]["query"].split(",") == [t.name for t in rf.fleet.spec.tenants]
    assert all(variables[v]["current"]["value"] == ["$__all"] for v in ("pool", "tenant"))
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    exprs = []
    for p in dash["panels"]:
        assert 0 <= p["gridPos"]["x"] and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["datasource"] == ds, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == ds
            exprs.append(t["expr"])
    # every query through the real PromQL parser (Grafana substitutes the variables first)
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"gpuplan:panel_{i}", "expr": grafana_substitute(e, "x", "y")} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "dashboard-queries.yaml"
    f.write_text(yaml.safe_dump(rules))
    r = run_promtool("check", "rules", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(exprs)} rules found" in r.stdout


def grafana_substitute(expr: str, pool: str, tenant: str) -> str:
    return expr.replace("$pool", pool).replace("$tenant", tenant)


def _schema_round_trip(dash: dict) -> list[str]:
    """What Grafana's dashboard model (grafana-foundation-sdk, generated from Grafana's own
    schema, with every panel and data-source plugin registered) loses or changes of ``dash``:
    a key the schema does not have is dropped by its ``from_json``."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    back = json.loads(json.dumps(Dashboard.from_json(dash), cls=JSONEncoder))
    problems: list[str] = []

    def walk(a, b, path: str) -> None:
        if isinstance(a, dict):
            if not isinstance(b, dict):
                problems.append(f"{path}: not an object in the schema")
                return
            for k, v in a.items():
                if k not in b:
                    problems.append(f"{path}/{k}: not in Grafana's dashboard schema")
                else:
                    walk(v, b[k], f"{path}/{k}")
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                problems.append(f"{path}: list changed")
                return
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            problems.append(f"{path}: {a!r} became {b!r}")

    walk(dash, back, "")
    return problems


def test_dashboard_fits_grafanas_dashboard_schema(compiled):
    dash = dashboard_json(compiled)
    assert _schema_round_trip(dash) == []
    # the check is live: keys Grafana's schema does not know are reported, at any depth
    bad = json.loads(json.dumps(dash))
    bad["refreshh"] = "1m"
    panel = next(p for p in bad["panels"] if p["type"] == "timeseries")
    panel["targets"][0]["exprr"] = panel["targets"][0]["expr"]
    panel["gridPos"]["width"] = 3
    assert sorted(_schema_round_trip(bad)) == sorted([
        "/refreshh: not in Grafana's dashboard schema",
        f"/panels[{bad['panels'].index(panel)}]/targets[0]/exprr: not in Grafana's dashboard schema",
        f"/panels[{bad['panels'].index(panel)}]/gridPos/width: not in Grafana's dashboard schema",
    ])


def _panel_expr(dash: dict, row: str, title: str) -> str:
    current = None
    for p in dash["panels"]:
        if p["type"] == "row":
            current = p["title"]
        elif current == row and p["title"] == title:
            return p["targets"][0]["expr"]
    raise AssertionError(f"no panel {title!r} in row {row!r}")


def test_dashboard_cost_evaluates_to_the_spec_prices(compiled, tmp_path):
    """The cost panels, evaluated by promtool on kube-state-metrics series: two train-a100 nodes
    (4 GPUs at $1.60) cost 2*4*1.60*24 a day; a vision pod holding one 3g.40gb slice on an
    infer-a100 node (half of a $1.60 A100-80GB) and one holding one GPU on train-a100 cost
    (0.80 + 1.60)*24 a day for tenant vision, and nothing for tenant nlp."""
    from tests.monitoring.promkit import KSM, series

    dash = dashboard_json(compiled)
    pool_cost = _panel_expr(dash, "Pool $pool", "Cost per day at the spec's prices")
    tenant_cost = _panel_expr(dash, "Tenant $tenant", "Cost per day at the spec's prices")
    nodes = [("a1", "train-a100"), ("a2", "train-a100"), ("i1", "infer-a100")]
    input_series = [series("kube_node_labels", {**KSM, "node": n, "label_gpuplan_dev_pool": p}, "1x10")
                    for n, p in nodes]
    input_series += [series("kube_namespace_labels", {**KSM, "namespace": ns, "label_gpuplan_dev_tenant": t},
                            "1x10") for ns, t in (("vision-serve", "vision"), ("vision-train", "vision"),
                                                  ("nlp-serve", "nlp"))]
    for ns, pod, node, res in (("vision-serve", "s-0", "i1", "nvidia_com_mig_3g_40gb"),
                               ("vision-train", "t-0", "a1", "nvidia_com_gpu"),
                               ("nlp-serve", "done-0", "i1", "nvidia_com_mig_1g_10gb")):
        input_series.append(series("kube_pod_container_resource_requests",
                                   {**KSM, "namespace": ns, "pod": pod, "container": "main", "node": node,
                                    "resource": res, "unit": "integer"}, "1x10"))
        phase = "Succeeded" if pod.startswith("done") else "Running"
        input_series.append(series("kube_pod_status_phase", {**KSM, "namespace": ns, "pod": pod, "phase": phase},
                                   "1x10"))
    cases = [(grafana_substitute(pool_cost, "train-a100", "-"), 2 * 4 * 1.6 * 24),
             (grafana_substitute(tenant_cost, "-", "vision"), (0.8 + 1.6) * 24)]
    test = {"rule_files": [], "tests": [{"interval": "1m", "input_series": input_series, "promql_expr_test": [
        {"expr": f"round({e}, 0.001)", "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": round(v, 3)}]}
        for e, v in cases] + [
        {"expr": grafana_substitute(tenant_cost, "-", "nlp"), "eval_time": "5m", "exp_samples": []}]}]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(test))
    r = run_promtool("test", "rules", "t.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_dashboard_size_does_not_grow_with_rows(tmp_path):
    """1,000 tenants and 100 pools: the dashboard ConfigMap stays far below 1 MiB."""
    import sys

    sys.path.insert(0, str(REPO))
    from benchmarks.make_fleet import make

    text = make(2000, 1000)
    text = re.sub(r"\n  pools:", "\n  monitoring: {release: kube-prometheus-stack}\n  pools:", text, count=1)
    p = tmp_path / "big.yaml"
    p.write_text(text)
    c = compile_ok(p)
    assert len(c.files[DASHBOARD_PATH]) < 256 * 1024, len(c.files[DASHBOARD_PATH])


# --- docs ------------------------------------------------------------------------------


def test_runbook_has_every_alert_and_every_annotation_points_into_it(compiled):
    text = compiled.files[RUNBOOK].decode()
    for a in ALERTS.values():
        assert f'<a id="{a.anchor}"></a>' in text and f"## {a.name}" in text
    for _, d in monitoring_objects(compiled):
        if d["kind"] != "PrometheusRule":
            continue
        for g in d["spec"]["groups"]:
            for r in g["rules"]:
                ref = r["annotations"]["runbook"]
                assert ref == f"generated/{RUNBOOK}#{ALERTS[r['alert']].anchor}"


def test_docs_describe_every_alert():
    text = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")
    for name in ALERTS:
        assert f"`{name}`" in text, name


# --- opt-in ----------------------------------------------------------------------------


def test_spec_without_monitoring_compiles_byte_identically(tmp_path):
    """Everything outside monitoring/ is what the spec without `monitoring:` gives, except the
    files that list or describe the tree and the ServiceMonitor keys; and without it no key
    is added anywhere (the values stay at `serviceMonitor: {enabled: true}`)."""
    text = EXAMPLES["argocd"].read_text(encoding="utf-8")
    without = re.sub(r"\n  monitoring:\n(    .*\n|\n)*?(?=  \w)", "\n", text)
    assert "monitoring:" in text and "monitoring:" not in without
    p = tmp_path / "fleet.yaml"
    p.write_text(without, encoding="utf-8")
    plain = compile_ok(p)
    full = compile_ok(EXAMPLES["argocd"])
    assert not [f for f in plain.files if f.startswith("monitoring/")]
    assert yaml.safe_load(plain.files["gpu-operator/values.yaml"])["dcgmExporter"]["serviceMonitor"] == {
        "enabled": True}
    described = {"README.md", "kustomization.yaml", "gpu-operator/values.yaml", ".gpuplan.sha256"}
    for path, data in plain.files.items():
        if path not in described:
            assert full.files[path] == data, path


def test_examples_without_monitoring_have_no_monitoring_output():
    for spec in sorted((REPO / "examples").glob("*.yaml")):
        if "monitoring:" in spec.read_text(encoding="utf-8"):
            continue
        c = compile_ok(spec)
        assert not [f for f in c.files if f.startswith("monitoring/")], spec
        assert yaml.safe_load(c.files["gpu-operator/values.yaml"])["dcgmExporter"]["serviceMonitor"] == {
            "enabled": True}


def test_bad_threshold_is_a_located_diagnostic(tmp_path):
    from gpuplan.compiler import check_fleet

    text = EXAMPLES["argocd"].read_text(encoding="utf-8").replace("underusedFor: 2h", "underusedFor: Never")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    checked = check_fleet(p)
    [d] = [d for d in checked.diagnostics if d.is_error]
    assert d.path == "spec.monitoring.thresholds.underusedFor" and d.line is not None
    assert d.code.startswith("GP1")
