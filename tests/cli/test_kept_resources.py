"""GPU resource names a change drops stay at 0 in every namespace's ``gpuplan-gpus`` quota until
retired (gpuplan.identity.kept_gpu_resources, docs/transitions.md): nodes advertise the old name
until they are repartitioned or replaced, and a ResourceQuota charges only the names its ``hard``
lists."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from tests.e2e.transitions import STATIC_MIG
from tests.rules.helpers import BASE

from gpuplan.cli.main import cli
from gpuplan.identity import QUOTA_NAME

OLD = "requests.nvidia.com/mig-1g.10gb"
NEW = "requests.nvidia.com/mig-3g.40gb"


def _build(tmp_path: Path, text: str, *extra: str):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(tmp_path / "generated"), "--format", "json", *extra],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return [d for d in json.loads(r.stdout)["diagnostics"]] if r.stdout.strip() else []


def _gpu_quotas(tmp_path: Path) -> dict[str, dict[str, str]]:
    out = {}
    for p in sorted((tmp_path / "generated" / "tenants").glob("*/resourcequotas.yaml")):
        for d in yaml.safe_load_all(p.read_text(encoding="utf-8")):
            if d and d["metadata"]["name"] == QUOTA_NAME:
                out[d["metadata"]["namespace"]] = d["spec"]["hard"]
    return out


def test_a_dropped_mig_name_stays_at_zero_until_retired(tmp_path):
    _build(tmp_path, BASE)
    assert _gpu_quotas(tmp_path)["alpha-ns"][OLD] == "8"
    _build(tmp_path, STATIC_MIG)  # 1g.10gb leaves the layout, 3g.40gb comes
    hard = _gpu_quotas(tmp_path)["alpha-ns"]
    assert hard[OLD] == "0" and hard[NEW] == "8"
    # read back from the tree on every build: the same spec keeps it
    _build(tmp_path, STATIC_MIG)
    assert _gpu_quotas(tmp_path)["alpha-ns"][OLD] == "0"
    # retired by hand once no node advertises it
    diags = _build(tmp_path, STATIC_MIG, "--retire-resource", "nvidia.com/mig-1g.10gb")
    assert not [d for d in diags if d["code"] == "GP812"]
    assert OLD not in _gpu_quotas(tmp_path)["alpha-ns"]
    # and gone for good: the next build does not bring it back
    _build(tmp_path, STATIC_MIG)
    assert OLD not in _gpu_quotas(tmp_path)["alpha-ns"]


def test_every_namespace_keeps_the_name_and_a_name_advertised_again_is_granted_again(tmp_path):
    two = BASE.replace("  tenants:\n", "  tenants:\n    - {name: beta, namespaces: [beta-ns, beta-dev]}\n")
    _build(tmp_path, two)
    _build(tmp_path, STATIC_MIG.replace("  tenants:\n", "  tenants:\n    - {name: beta, namespaces: [beta-ns, beta-dev]}\n"))
    quotas = _gpu_quotas(tmp_path)
    assert set(quotas) == {"alpha-ns", "beta-ns", "beta-dev"}
    assert all(h[OLD] == "0" for h in quotas.values())
    _build(tmp_path, two)  # the layout comes back: the grant is the spec's again
    assert _gpu_quotas(tmp_path)["alpha-ns"][OLD] == "8"


def test_retiring_a_name_the_quotas_do_not_keep_retires_nothing(tmp_path):
    _build(tmp_path, BASE)
    diags = _build(tmp_path, STATIC_MIG, "--retire-resource", "nvidia.com/mig-2g.20gb",
                   "--retire-resource", "nvidia.com/mig-3g.40gb")
    said = sorted(d["message"].split(":")[0] for d in diags if d["code"] == "GP812")
    assert said == ["--retire-resource nvidia.com/mig-2g.20gb", "--retire-resource nvidia.com/mig-3g.40gb"]
    hard = _gpu_quotas(tmp_path)["alpha-ns"]
    assert hard[NEW] == "8" and hard[OLD] == "0"  # a current name is never retired; the kept one stays


def test_a_hand_added_key_that_is_no_gpu_name_is_not_kept(tmp_path):
    _build(tmp_path, BASE)
    p = tmp_path / "generated" / "tenants" / "alpha" / "resourcequotas.yaml"
    docs = [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
    for d in docs:
        if d["metadata"]["name"] == QUOTA_NAME:
            d["spec"]["hard"]["requests.example.com/fpga"] = "0"
            d["spec"]["hard"]["requests.cpu"] = "0"
    p.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    _build(tmp_path, STATIC_MIG, "--force")
    hard = _gpu_quotas(tmp_path)["alpha-ns"]
    assert "requests.example.com/fpga" not in hard and "requests.cpu" not in hard and hard[OLD] == "0"
