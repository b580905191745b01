"""#28 item 5: instance-aware Karpenter settings — terminationGracePeriod on job pools, EFA for
multi-node jobs on EFA instance types, capacity reservations (GP653, GP654)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import compile_fleet

from test_karpenter_output import problems, spec_file

H100 = "    - name: train\n      gpu: H100-SXM5-80GB\n      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714%s}\n"
GANG = "    - {name: training, pool: train, workload: training, priority: 100000, gang: {nodesPerJob: 2}}\n"
SERVE = "    - {name: serving, pool: train, workload: inference, priority: 300000}\n"
QUEUE = "  queueing: {}\n"


def _compile(tmp_path: Path, extra: str = "", tiers: str = GANG):
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = spec_file(tmp_path, H100 % extra, tiers + (QUEUE if "gang" in tiers else ""))
    return compile_fleet(p)


def _doc(r, path: str) -> dict:
    return yaml.safe_load(r.files[path])


def _readme(r) -> str:
    t = r.files["README.md"]
    return t.decode() if isinstance(t, bytes) else t


def test_job_pool_gets_a_termination_grace_period(tmp_path: Path) -> None:
    # kubernetes-sigs/karpenter@v1.14.1 pkg/apis/v1/nodeclaim.go:57-69: without it the controller
    # waits for ever for do-not-disrupt pods on a node it deletes.
    r = _compile(tmp_path)
    np_ = _doc(r, "pools/train/nodepool.yaml")
    assert np_["spec"]["template"]["spec"]["terminationGracePeriod"] == "1h"
    assert problems(np_) == []
    assert "`terminationGracePeriod`" in _readme(r) and "`train` 1h" in _readme(r)


def test_serving_pool_waits_and_spec_overrides(tmp_path: Path) -> None:
    r = _compile(tmp_path / "a", tiers=SERVE)
    assert "terminationGracePeriod" not in _doc(r, "pools/train/nodepool.yaml")["spec"]["template"]["spec"]
    r = _compile(tmp_path / "b", ", terminationGracePeriod: 3h30m")
    assert _doc(r, "pools/train/nodepool.yaml")["spec"]["template"]["spec"]["terminationGracePeriod"] == "3h30m"


def test_gang_pool_on_efa_instances_gets_efa_prerequisites(tmp_path: Path) -> None:
    # Karpenter attaches instance-type-many EFA interfaces only to a node launched for a pod that
    # requests vpc.amazonaws.com/efa (aws/karpenter-provider-aws@v1.14.1
    # pkg/providers/instance/instance.go:699-720, launchtemplate.go:334-351).
    r = _compile(tmp_path)
    text = _readme(r)
    assert "EFA device plugin" in text
    assert "`train` (32 EFA interfaces per node; taints `nvidia.com/gpu=present:NoSchedule`, " \
           "`gpuplan.dev/pool=train:NoSchedule`)" in text
    assert "vpc.amazonaws.com/efa" in text
    # nothing in the EC2NodeClass: networkInterfaces cannot make the primary interface an EFA
    assert "networkInterfaces" not in _doc(r, "pools/train/ec2nodeclass.yaml")["spec"]


def test_efa_off_without_gang_or_when_switched_off(tmp_path: Path) -> None:
    assert "EFA device plugin" not in _readme(_compile(tmp_path / "a", tiers=SERVE))
    assert "EFA device plugin" not in _readme(_compile(tmp_path / "b", ", efa: false"))


def test_efa_on_instance_type_without_efa_is_gp653(tmp_path: Path) -> None:
    p = spec_file(tmp_path, "    - name: l4\n      gpu: L4\n      karpenter: {instanceTypes: [g6.xlarge], "
                  "maxGPUs: 4, amiVersion: v20260714, efa: true}\n")
    r = compile_fleet(p)
    d = [x for x in r.diagnostics if x.code == "GP653"]
    assert len(d) == 1 and "g6.xlarge" in d[0].message and d[0].path.endswith("karpenter.efa")


def test_capacity_reservations_reach_the_ec2nodeclass(tmp_path: Path) -> None:
    # reserved offerings only from the selected reservations (aws/karpenter-provider-aws@v1.14.1
    # pkg/providers/instancetype/offering/reserved_capacity_resolver.go:67-91)
    r = _compile(tmp_path, ", capacityTypes: [reserved, on-demand], capacityReservations: "
                 "[{id: cr-0123456789abcdef0}, {tags: {team: ml}, ownerID: '123456789012'}]")
    nc = _doc(r, "pools/train/ec2nodeclass.yaml")
    assert nc["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}, {"tags": {"team": "ml"}, "ownerID": "123456789012"}]
    assert problems(nc) == []
    assert not [x for x in r.diagnostics if x.code == "GP654"]


def test_reservations_and_capacity_types_must_agree(tmp_path: Path) -> None:
    r = _compile(tmp_path / "a", ", capacityReservations: [{id: cr-0123456789abcdef0}]")
    assert [x.path for x in r.diagnostics if x.code == "GP654"] == ["spec.pools[0].karpenter.capacityReservations"]
    r = _compile(tmp_path / "b", ", capacityTypes: [reserved]")
    assert [x.path for x in r.diagnostics if x.code == "GP654"] == ["spec.pools[0].karpenter.capacityTypes"]


def test_a_reservation_term_is_an_id_or_tags(tmp_path: Path) -> None:
    r = _compile(tmp_path, ", capacityTypes: [reserved], capacityReservations: [{id: cr-01, tags: {a: b}}]")
    assert not r.files and any(d.is_error for d in r.diagnostics)
