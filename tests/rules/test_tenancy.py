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
