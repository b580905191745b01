"""`gpuplan verify-cluster --tree` names the kept config names no live node carries (GP886)
and the kept namespaces the cluster no longer has (GP887), each with the build command that
retires it (docs/transitions.md).

Karpenter labels a node only when it registers (kubernetes-sigs/karpenter v1.14.1
pkg/controllers/nodeclaim/lifecycle/registration.go:207-221), so once no node carries an old
name, none will again; a kept AppProject destination only admits the prune of what a removed
tenant left, which needs the namespace to exist."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from tests.lower.test_config_transitions import SLICED, _build
from tests.outputkit import one
from tests.rules.helpers import BASE, edit

from gpuplan.cli.main import cli
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL, POOL_LABEL

TWO = edit(BASE, "  tenants:\n", "  tenants:\n    - {name: beta, namespaces: [beta-ns]}\n")


def _node(name: str, pool: str, config: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {POOL_LABEL: pool, DEVICE_PLUGIN_CONFIG_LABEL: config,
                                                  "karpenter.sh/nodepool": pool}},
            "spec": {}, "status": {}}


def _namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _verify(tmp_path: Path, items: list[dict]) -> tuple[int, list[dict]]:
    live = tmp_path / "live.json"
    live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    r = CliRunner().invoke(cli, ["verify-cluster", str(tmp_path / "fleet.yaml"), "--live", str(live),
                                 "--tree", str(tmp_path / "generated"), "--format", "json"], catch_exceptions=False)
    return r.exit_code, [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] in ("GP886", "GP887")]


def test_a_kept_config_name_no_node_carries_is_named_with_its_retire_command(tmp_path):
    before = _build(tmp_path, SLICED)
    after = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    old, new = (one(c, "pools/batch-l4/nodepool.yaml")["spec"]["template"]["metadata"]["labels"]
                [DEVICE_PLUGIN_CONFIG_LABEL] for c in (before, after))
    # an old node still carries it: nothing to retire
    code, found = _verify(tmp_path, [_node("ip-1", "batch-l4", old), _node("ip-2", "batch-l4", new)])
    assert found == []
    # the old nodes are gone: GP886, info (it changes no exit status), at the pool, with the exact command
    assert _verify(tmp_path, [_node("ip-2", "batch-l4", new), _node("ip-3", "batch-l4", new)])[0] == code
    code, found = _verify(tmp_path, [_node("ip-2", "batch-l4", new)])
    [d] = found
    assert d["severity"] == "info"
    assert d["hint"] == f"gpuplan build {tmp_path / 'fleet.yaml'} --retire-config {old}"
    assert old in d["message"] and "batch-l4" in d["message"]
    assert d["path"] == "spec.pools[3]"
    # running it retires the name: verify-cluster has nothing more to say
    r = CliRunner().invoke(cli, ["build", str(tmp_path / "fleet.yaml"), "-o", str(tmp_path / "generated"),
                                 "--retire-config", old], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert _verify(tmp_path, [_node("ip-2", "batch-l4", new)])[1] == []


def test_a_kept_namespace_the_cluster_no_longer_has_is_named_with_its_retire_command(tmp_path):
    spec = tmp_path / "fleet.yaml"
    for text in (TWO, BASE):  # beta leaves: the project keeps beta-ns while its objects are pruned
        spec.write_text(text, encoding="utf-8")
        r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "generated")], catch_exceptions=False)
        assert r.exit_code == 0, r.output
    assert b"beta-ns" in (tmp_path / "generated" / "delivery" / "project" / "appproject.yaml").read_bytes()
    # still there (someone has to delete it by hand): nothing to retire
    assert _verify(tmp_path, [_namespace("alpha-ns"), _namespace("beta-ns")])[1] == []
    # no Namespace in the input: gpuplan cannot tell, and says nothing
    assert _verify(tmp_path, [])[1] == []
    [d] = _verify(tmp_path, [_namespace("alpha-ns")])[1]
    assert d["code"] == "GP887" and d["severity"] == "info"
    assert d["hint"] == f"gpuplan build {spec} --retire-namespace beta-ns"
    r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "generated"),
                                 "--retire-namespace", "beta-ns"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert _verify(tmp_path, [_namespace("alpha-ns")])[1] == []


def test_a_kept_gpu_resource_no_node_advertises_is_named_with_its_retire_command(tmp_path):
    from tests.e2e.transitions import STATIC_MIG

    spec = tmp_path / "fleet.yaml"
    for text in (BASE, STATIC_MIG):  # 1g.10gb leaves pool infer's layout: the quotas keep it at 0
        spec.write_text(text, encoding="utf-8")
        r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "generated")], catch_exceptions=False)
        assert r.exit_code == 0, r.output

    def node(resource: str) -> dict:
        n = _node("n3", "infer", "x")
        n["status"] = {"capacity": {resource: "7"}, "allocatable": {resource: "7"}}
        return n

    def found(items):
        live = tmp_path / "live.json"
        live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
        r = CliRunner().invoke(cli, ["verify-cluster", str(spec), "--live", str(live), "--tree",
                                     str(tmp_path / "generated"), "--format", "json"], catch_exceptions=False)
        return [d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "GP888"]

    # node n3 is not repartitioned yet: it still advertises the old name
    assert found([node("nvidia.com/mig-1g.10gb")]) == []
    [d] = found([node("nvidia.com/mig-3g.40gb")])
    assert d["severity"] == "info" and "nvidia.com/mig-1g.10gb" in d["message"]
    assert d["hint"] == f"gpuplan build {spec} --retire-resource nvidia.com/mig-1g.10gb"
    r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "generated"),
                                 "--retire-resource", "nvidia.com/mig-1g.10gb"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert found([node("nvidia.com/mig-3g.40gb")]) == []
