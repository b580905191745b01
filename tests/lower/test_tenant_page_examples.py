"""A tenant page's example Pod and Job are each tier's dumped once, with the tenant's
namespace written into its place (``yamlwriter.dump_template``): the page holds the same
YAML as a full dump of each object, also for namespaces a YAML reader would take for a
number, a date or a boolean unquoted."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import check_fleet, render_files
from gpuplan.identity import contract_job, contract_pod, contract_spec
from gpuplan.render.yamlwriter import dump

REPO = Path(__file__).resolve().parents[2]
# namespaces that are valid DNS labels and need quotes in YAML: a boolean, an int, a date, a hex int
RENAMED = {"vision-train": "on", "vision-serve": "123", "nlp-train": "2001-01-01", "nlp-serve": "0x1f"}


def test_examples_match_the_full_dump_for_namespaces_that_need_quotes(tmp_path):
    text = (REPO / "examples" / "fleet.yaml").read_text()
    for old, new in RENAMED.items():
        text = text.replace(old, f"'{new}'")  # quoted in the spec: a string there too
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text)
    checked = check_fleet(spec)
    assert not checked.failed(), [d.message for d in checked.diagnostics if d.is_error]
    rf = checked.resolved
    files = render_files(rf, "fleet.yaml")
    seen = set()
    for tn in rf.fleet.spec.tenants:
        page = files[f"tenants/{tn.name}/README.md"].decode()
        for ns, grants in tn.quotas.items():
            for name, units in grants.items():
                tier = rf.tier_by_name[name]
                if units <= 0 or next(n for n, per in tn.quotas.items() if per.get(name, 0) > 0) != ns:
                    continue  # the page's example stands in the first namespace granted the tier
                spec_ = contract_spec(rf, tier)
                for obj in (contract_pod(rf, tier, ns, spec_), contract_job(rf, tier, ns, spec_)):
                    full = dump(obj)
                    assert full in page, (tn.name, name, ns)
                    assert yaml.safe_load(full)["metadata"]["namespace"] == ns
                seen.add(ns)
    assert set(RENAMED.values()) <= seen
    assert "namespace: 'on'\n" in files["tenants/vision/README.md"].decode()
