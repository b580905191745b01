"""A GPU resource name a change drops, on the API server: the quotas keep it at 0, so a pod that
asks for it is refused from the step that applies the new quotas on, and after the sync, below Kubernetes 1.30 too, where
no admission policy guards the name (gpuplan.identity.kept_gpu_resources). Nodes still advertise
the old name until they are repartitioned: without the zero key, ResourceQuota admission would
charge the request to no quota and admit it (kubernetes@v1.36.3
plugin/pkg/admission/resourcequota/controller.go ``checkRequest``)."""

from __future__ import annotations

import copy

import pytest

from gpuplan.identity import QUOTA_NAME, contract_pod, contract_pod_spec
from tests.e2e.engine import load_tree
from tests.e2e.transitions import STATIC_MIG, build_pair, replay
from tests.rules.helpers import BASE

pytestmark = pytest.mark.slow

OLD = "nvidia.com/mig-1g.10gb"


@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_a_dropped_name_is_refused_at_every_step(version, tmp_path, clusters):
    before, after = (t.replace('kubernetesVersion: "1.33"', f'kubernetesVersion: "{version}"') for t in (BASE, STATIC_MIG))
    old, new = build_pair(tmp_path, before, after)
    serve = old.rf.tier_by_name["serve"]
    pod = contract_pod(old.rf, serve, "alpha-ns", contract_pod_spec(old.rf, serve, OLD, 1))
    cp = clusters.start(f"dropped-{version}")
    try:
        verdicts = []
        for st, d in replay(cp, old, new):
            assert not d.refusals, [str(r) for r in d.refusals]
            d.wait_default_service_account("alpha-ns")
            d.wait_quotas()
            code, body = cp.create(pod, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
            verdicts.append((st.name, code))
        # the old tree grants it (and so does every step before the quotas' wave); from the step that
        # applies the new quotas on, every state refuses it: no step opens it again
        codes = [code for _, code in verdicts]
        assert codes[0] == 201, verdicts
        first = next(i for i, c in enumerate(codes) if c != 201)
        assert all(c in (403, 422) for c in codes[first:]), verdicts
        # the zero key is what refuses it: without it (the name retired) the same pod is admitted
        # where no policy guards the name
        quota = next(o for o in load_tree(new.tree).objects.values()
                     if o.get("kind") == "ResourceQuota" and o["metadata"]["name"] == QUOTA_NAME
                     and o["metadata"]["namespace"] == "alpha-ns")
        retired = copy.deepcopy(quota)
        del retired["spec"]["hard"][f"requests.{OLD}"]
        code, body = cp.request("PUT", cp.path_of(retired), {**retired, "metadata": {
            **retired["metadata"], "resourceVersion": cp.get(cp.path_of(retired))["metadata"]["resourceVersion"]}})
        assert code == 200, body.get("message")
        d.wait_quotas()  # the quota controller has written the new hard keys into the status
        code, body = cp.create(pod, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
        if version == "1.29":
            assert code == 201, (code, body.get("message"))
        else:  # the class policy refuses a resource its tier does not hand out
            assert code in (403, 422), (code, body.get("message"))
    finally:
        clusters.stop(cp)
