"""Volcano's Queue, PodGroup and Job on the API server, with the CRDs the test control plane
builds from gpuplan's pinned v1.15.1 schemas (``fromPackage`` in tests/cluster/crds.json): the
objects `gpuplan verify` accepts are created, the ones it rejects are refused."""

from __future__ import annotations

import copy

import pytest
import yaml

from gpuplan.verify.verifier import verify_paths
from tests.conftest import replaced
from tests.upstream.test_volcano import JOB, PODGROUP, QUEUE

pytestmark = pytest.mark.slow

CASES = [
    ("queue", QUEUE, None, None),
    ("podgroup", PODGROUP, None, None),
    ("job", JOB, None, None),
    ("queue-weight-0", QUEUE, ("spec", "weight"), 0),
    ("queue-parent-capitals", QUEUE, ("spec", "parent"), "Research"),
    ("queue-deserved-not-a-quantity", QUEUE, ("spec", "deserved"), {"nvidia.com/gpu": "eight"}),
    ("podgroup-queue-capitals", PODGROUP, ("spec", "queue"), "Team-A"),
    ("job-task-name-capitals", JOB, ("spec", "tasks", 0, "name"), "Worker"),
]


def test_the_api_server_agrees_with_gpuplan_verify(tmp_path, clusters):
    cp = clusters.start("volcano-crds")
    code, body = cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    assert code < 300, body
    got = {}
    for name, obj, path, value in CASES:
        o = copy.deepcopy(obj) if path is None else replaced(obj, path, value)
        d = tmp_path / name
        d.mkdir()
        (d / "o.yaml").write_text(yaml.safe_dump(o), encoding="utf-8")
        code, body = cp.create(o, dry_run=True)
        got[name] = (verify_paths([str(d)]).ok, code < 300, body.get("message", ""))
    assert {n: g[:2] for n, g in got.items()} == {
        n: (path is None, path is None) for n, _, path, _ in CASES}, got
    # the API server also holds a custom resource's name to a DNS subdomain (lower case)
    code, body = cp.create({**QUEUE, "metadata": {"name": "Team-A"}}, dry_run=True)
    assert code == 422, body
