"""GP501-GP505: namespaces, priorities, empty tenants."""

import pytest

from tests.rules.helpers import BASE, edit, only, position


def test_gp501_system_namespaces(run):
    for ns in ("kube-system", "default", "gpu-operator", "argocd", "kube-custom"):
        text = edit(BASE, "namespaces: [alpha-ns]", f"namespaces: [alpha-ns, {ns}]")
        d = only(run(text), "GP501")
        assert (d.line, d.col) == position(text, ns + "]"), ns
        assert ns in d.message


def test_gp501_custom_operator_namespace(run):
    text = edit(BASE, '    kubernetesVersion: "1.33"\n', '    kubernetesVersion: "1.33"\n    gpuOperator: {namespace: nvidia-ops}\n')
    text = edit(text, "namespaces: [alpha-ns]", "namespaces: [alpha-ns, nvidia-ops]")
    d = only(run(text), "GP501")
    assert "GPU Operator" in d.message
    assert "GP501" not in run.codes(edit(BASE, "namespaces: [alpha-ns]", "namespaces: [alpha-ns, gpu-ops]"))


def test_gp502_lowest_tier_may_preempt_nothing(run):
    text = edit(BASE, "    - {name: notebooks,",
                "    - {name: training-low, pool: train, workload: batch, priority: 1}\n    - {name: notebooks,")
    d = only(run(text), "GP502")
    assert (d.line, d.col) == position(text, "training-low,")
    assert d.severity.value == "info"
    fixed = edit(text, "priority: 1}", "priority: 1, preemption: Never}")
    assert "GP502" not in run.codes(fixed)


def test_gp503_training_outranks_inference(run):
    # a training tier on the same MIG resource, above the serving tier
    text = edit(BASE, "    - {name: notebooks,",
                "    - {name: finetune, pool: infer, profile: 1g.10gb, workload: training, priority: 9000}\n"
                "    - {name: notebooks,")
    d = only(run(text), "GP503")
    assert (d.line, d.col) == position(text, "5000}")
    assert "finetune" in d.message and "9000" in d.message
    fixed = edit(text, "priority: 9000}", "priority: 9000, preemption: Never}")
    assert "GP503" not in run.codes(fixed)


def test_gp504_tenant_without_quota(run):
    text = BASE + "    - name: beta\n      namespaces: [beta-ns]\n"
    d = only(run(text), "GP504")
    assert (d.line, d.col) == position(text, "beta\n")
    zero = BASE + "    - name: beta\n      namespaces: [beta-ns]\n      quotas: {beta-ns: {notebooks: 0}}\n"
    assert "GP504" in run.codes(zero)


@pytest.mark.parametrize("ns,engine", [("argocd", "argocd"), ("flux-system", "flux"), ("default", "argocd"),
                                       ("kube-system", "argocd"), ("kube-gpu", "argocd"), ("karpenter", "argocd")])
def test_gp505_operator_namespace_belongs_to_the_cluster(run, ns, engine):
    text = edit(BASE, "      repoURL: https://git.example.com/fleet.git\n",
                f"      repoURL: https://git.example.com/fleet.git\n      engine: {engine}\n"
                f"    gpuOperator: {{namespace: {ns}}}\n")
    d = only(run(text), "GP505")
    assert (d.line, d.col) == position(text, f"{ns}}}")
    assert d.hint == "give the operator its own namespace, e.g. gpu-operator"


@pytest.mark.parametrize("ns,engine", [("gpu-operator", "argocd"), ("nvidia-gpu-operator", "argocd"),
                                       ("argocd", "flux"), ("flux-system", "argocd")])
def test_gp505_own_namespace_passes(run, ns, engine):
    text = edit(BASE, "      repoURL: https://git.example.com/fleet.git\n",
                f"      repoURL: https://git.example.com/fleet.git\n      engine: {engine}\n"
                f"    gpuOperator: {{namespace: {ns}}}\n")
    assert "GP505" not in run.codes(text)


@pytest.mark.parametrize("exempting", [
    "    admission: {unmanagedNamespaces: [alpha-ns]}\n",
    "    admission: {systemNamespaces: [kube-system, alpha-ns]}\n",
])
def test_gp506_a_tenant_namespace_no_policy_binds_is_refused_at_its_line(run, exempting):
    """A tenant namespace that is also exempt (unmanaged, system, monitoring, Kueue, DRA driver)
    is outside every admission binding (gpuplan.identity.exempt_namespaces)."""
    text = edit(BASE, "      repoURL: https://git.example.com/fleet.git\n",
                "      repoURL: https://git.example.com/fleet.git\n" + exempting)
    d = only(run(text), "GP506")
    assert (d.line, d.col) == position(text, "alpha-ns]\n      quotas")
    assert "alpha-ns" in d.message and "cluster.admission" in d.message
    fixed = exempting.replace("alpha-ns]", "logging]")
    assert "GP506" not in run.codes(edit(text, exempting, fixed))


def test_gp506_the_monitoring_namespace_is_no_tenant_namespace(run):
    text = edit(BASE, "  tenants:\n", "  monitoring: {namespace: alpha-ns}\n  tenants:\n")
    d = only(run(text), "GP506")
    assert "monitoring namespace" in d.message
    assert "GP506" not in run.codes(edit(text, "{namespace: alpha-ns}", "{namespace: monitoring}"))


def test_gp507_a_privileged_tenant_is_a_warning_at_its_line(run):
    text = edit(BASE, "      namespaces: [alpha-ns]\n", "      namespaces: [alpha-ns]\n      podSecurity: privileged\n")
    d = only(run(text), "GP507")
    assert d.severity.value == "warning" and (d.line, d.col) == position(text, "privileged")
    assert "GP507" not in run.codes(edit(text, "podSecurity: privileged", "podSecurity: restricted"))


def test_gp508_controllers_a_tenant_can_act_as(run):
    queued = edit(BASE, "  tenants:\n", "  queueing:\n    kueue: {chartVersion: 0.19.2}\n"
                  "    controllers: [\"system:serviceaccount:kube-system:job-controller\", \"CONTROLLER\"]\n  tenants:\n")
    for user, why in (("system:serviceaccount:alpha-ns:default", "tenant 'alpha'"),
                      ("system:anonymous", "unauthenticated")):
        text = queued.replace("CONTROLLER", user)
        d = only(run(text), "GP508")
        assert why in d.message and (d.line, d.col) == position(text, f"\"{user}")
    assert "GP508" not in run.codes(queued.replace("CONTROLLER", "system:serviceaccount:ops:launcher"))
