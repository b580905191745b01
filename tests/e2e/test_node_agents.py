"""Node agents' namespaces on the API server: a DaemonSet in ``logging``
(``cluster.admission.nodeAgentNamespaces``) may tolerate every taint, and is refused a GPU, the
device list variable, or the same toleration on any other kind; elsewhere the toleration is refused.
The in-build proof's verdicts are the same (tests/placement/test_node_agents.py)."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import deploy
from tests.e2e.transitions import build_pair
from tests.placement.test_node_agents import AGENTS, _denied, daemonset

pytestmark = pytest.mark.slow


def test_a_node_agents_daemonset_tolerates_the_pools_and_nothing_more(tmp_path, clusters):
    built, _ = build_pair(tmp_path, AGENTS, AGENTS)
    cp = clusters.start("node-agents")
    try:
        d = deploy(cp, built.tree)
        assert not d.refusals, [str(r) for r in d.refusals]
        d.ensure_namespace("logging")
        probe = daemonset("default")
        cp.wait(lambda: cp.create(probe, dry_run=True, impersonate="tenant",
                                  groups=("system:authenticated",))[0] != 201, 60, "the policies in force")
        verdicts = {}
        for name, obj in {"daemonset": daemonset("logging"), "gpu": daemonset("logging", gpu=True),
                          "env": daemonset("logging", env=True), "deployment": daemonset("logging", kind="Deployment"),
                          "elsewhere": daemonset("default")}.items():
            code, body = cp.create(obj, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
            verdicts[name] = (code == 201, not _denied(built.rf, obj))
        assert verdicts == {"daemonset": (True, True), "gpu": (False, False), "env": (False, False),
                            "deployment": (False, False), "elsewhere": (False, False)}
    finally:
        clusters.stop(cp)
