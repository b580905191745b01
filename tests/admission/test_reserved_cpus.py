"""reservedSystemCPUs is parsed as the kubelet parses it (k8s.io/utils/cpuset Parse) and
checked against the vCPUs of every instance type of a Karpenter pool."""

from __future__ import annotations

import pytest

from gpuplan.rules.topology import parse_cpuset
from tests.conftest import finishes
from tests.rules.helpers import BASE, edit, only, position


@pytest.mark.parametrize("text,ranges", [
    ("0", [(0, 0)]), ("0,1", [(0, 1)]), ("0-3", [(0, 3)]), ("1-1", [(1, 1)]),
    ("0-1,56-57", [(0, 1), (56, 57)]), ("+2", [(2, 2)]), ("3,0-2", [(0, 3)]),
    ("0-999999999999", [(0, 999999999999)]),
])
def test_parse_like_the_kubelet(text, ranges):
    assert parse_cpuset(text) == ranges


@pytest.mark.parametrize("text", ["3-1", "cpu0", "0 1", "0,,1", "-1", "0-", "1-2-3", "0x1", "1,", " 1",
                                  "9" * 30, "0-" + "9" * 5000])
def test_refused_like_the_kubelet(text):
    with pytest.raises(ValueError):
        parse_cpuset(text)


def _static(cpus: str) -> str:
    return edit(BASE, "      sharing: {mode: exclusive}\n",
                f'      sharing: {{mode: exclusive}}\n      topology: {{policy: restricted, reservedSystemCPUs: "{cpus}"}}\n')


@pytest.mark.parametrize("cpus", ["3-1", "0 1", "", "0-" + "9" * 5000])
def test_gp609_static_pool(run, cpus):
    text = _static(cpus)
    d = only(finishes(lambda: run(text)), "GP609")  # a 5,000-digit range is refused, not expanded
    assert (d.line, d.col) == position(text, f'"{cpus}"')
    assert "ascending" in d.hint


@pytest.mark.parametrize("cpus", ["0,1", "0-1,56-57", "1-1"])
def test_good_lists_pass(run, cpus):
    assert "GP609" not in run.codes(_static(cpus))


KARP = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {repoURL: "https://git.example.com/t.git"}
    aws: {clusterName: t, nodeRole: r}
  pools:
    - name: infer
      gpu: L40S
      karpenter: {instanceTypes: [TYPES], maxGPUs: 8, amiVersion: v20260714}
      topology: {policy: restricted, reservedSystemCPUs: "CPUS"}
"""


@pytest.mark.parametrize("types,cpus,code", [
    ("g6e.xlarge", "0-7", "GP627"),        # 4 vCPUs
    ("g6e.xlarge", "4", "GP627"),
    ("g6e.xlarge, g6e.2xlarge", "0-5", "GP627"),  # the smallest type decides
    ("g6e.xlarge", "0-3", "GP628"),        # every CPU reserved
    ("g6e.xlarge", "0,1,2,3", "GP628"),
    ("g6e.xlarge", "0", None),
    ("g6e.2xlarge", "0-1", None),
])
def test_karpenter_instance_cpus(run, types, cpus, code):
    text = KARP.replace("TYPES", types).replace("CPUS", cpus)
    diags = run(text)
    got = [d for d in diags if d.code in ("GP627", "GP628", "GP609")]
    if code is None:
        assert got == []
        return
    d = only(diags, code)
    assert (d.line, d.col) == position(text, f'"{cpus}"')
    assert d.hint and "vCPUs" in d.message


# --- static pools: the online CPUs the node probe recorded -------------------------------

def _inventory(tmp_path, name: str, online: str | None) -> str:
    from gpuplan.probe.inventory import Metadata, NodeInventory, Probe, SystemInfo, dump_yaml

    inv = NodeInventory(metadata=Metadata(name=name), probe=Probe(version="0.1.0", source="fake"),
                        system=SystemInfo(hostname=name, online_cpus=online))
    (tmp_path / "inventory").mkdir(exist_ok=True)
    (tmp_path / "inventory" / f"{name}.yaml").write_text(dump_yaml(inv), encoding="utf-8")
    return f"inventory/{name}.yaml"


def _static_inv(tmp_path, cpus: str, online: dict[str, str | None]) -> str:
    files = [_inventory(tmp_path, n, o) for n, o in online.items()]
    text = _static(cpus)
    return edit(text, "  pools:\n", f"  inventory: [{', '.join(files)}]\n  pools:\n")


@pytest.mark.parametrize("cpus,online,code,named", [
    ("0-7", {"n1": "0-3", "n2": "0-3"}, "GP627", "n1 (and 1 more"),   # CPUs 4-7 do not exist
    ("4", {"n1": "0-3"}, "GP627", "n1"),
    ("2", {"n1": "0-1,3"}, "GP627", "n1"),                             # CPU 2 offline (hole)
    ("0,1", {"n1": "0-63", "n2": "1-63"}, "GP627", "n2"),               # only n2 lacks CPU 0
    ("0-3", {"n1": "0-3"}, "GP628", "n1"),                              # every CPU reserved
    ("0,1,2,3", {"n1": "0-3", "n2": "0-63"}, "GP628", "n1"),
    ("0-1,3-4", {"n1": "0-1,3-4"}, "GP628", "n1"),
])
def test_static_online_cpus_refused(run, tmp_path, cpus, online, code, named):
    text = _static_inv(tmp_path, cpus, online)
    diags = run(text)
    d = only(diags, code)
    assert (d.line, d.col) == position(text, f'"{cpus}"')
    assert f"node {named}" in d.message and "online" in d.message
    assert d.hint
    assert [x.code for x in diags if x.code in ("GP627", "GP628", "GP609")] == [code]


@pytest.mark.parametrize("cpus,online", [
    ("0,1", {"n1": "0-3", "n2": "0-223"}),
    ("0-1,56-57", {"n1": "0-111"}),
    ("3", {"n1": "0-1,3-4"}),
    ("0-7", {"n1": None, "n2": None}),      # inventories without onlineCpus: nothing to check against
    ("0-7", {"n1": "0-63", "n2": None}),
])
def test_static_online_cpus_pass(run, tmp_path, cpus, online):
    diags = run(_static_inv(tmp_path, cpus, online))
    assert [d.code for d in diags if d.code in ("GP627", "GP628", "GP609")] == []


def test_older_inventory_without_online_cpus_loads(tmp_path):
    """An inventory written before onlineCpus was recorded reads back unchanged."""
    from gpuplan.probe.inventory import NodeInventory

    path = _inventory(tmp_path, "old", None)
    import yaml

    doc = yaml.safe_load((tmp_path / path).read_text())
    assert "onlineCpus" not in doc["system"]
    assert NodeInventory.model_validate(doc).system.online_cpus is None
