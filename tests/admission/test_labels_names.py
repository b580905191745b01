"""Node labels nfd-master refuses or renames, too many NodePool labels, and derived
names that no longer fit a label value: each at its line with a hint."""

from __future__ import annotations

import pytest

from tests.rules.helpers import BASE, edit, only, position

TRAIN = "    - name: train\n      gpu: A100-SXM4-80GB\n"


def _with_label(key: str) -> str:
    return edit(BASE, TRAIN, TRAIN + f"      labels: {{{key}: x}}\n")


@pytest.mark.parametrize("key", ["kubernetes.io/role", "node.kubernetes.io/role", "topology.kubernetes.io/rack",
                                 "node-role.kubernetes.io/gpu"])
def test_nfd_refuses_kubernetes_io_labels(run, key):
    text = _with_label(key)
    d = only(run(text), "GP622")
    assert (d.line, d.col) == position(text, key)
    assert "example.com/" in d.hint


@pytest.mark.parametrize("key", ["example.com/team", "feature.node.kubernetes.io/x",
                                 "gpu.feature.node.kubernetes.io/x", "profile.node.kubernetes.io/p",
                                 "k8s.io/x", "nvidia.com/custom"])
def test_nfd_accepts(run, key):
    codes = run.codes(_with_label(key))
    assert "GP622" not in codes and "GP623" not in codes


def test_nfd_prefixes_unprefixed_labels(run):
    text = _with_label("team")
    d = only(run(text), "GP623")
    assert d.severity.value == "warning"
    assert "feature.node.kubernetes.io/team" in d.message and d.hint == "give it a prefix of your own, e.g. example.com/team"
    assert (d.line, d.col) == position(text, "team: x")


def test_kubernetes_io_label_on_karpenter_pool_is_not_an_nfd_problem(run):
    # Karpenter sets template labels itself; only its CRD's rules apply (GP621)
    text = BASE.replace("    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                        "    - name: train\n      gpu: A100-SXM4-80GB\n      labels: {node.kubernetes.io/role: x}\n"
                        "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714}\n")
    text = edit(text, '      repoURL: https://git.example.com/fleet.git\n',
                '      repoURL: https://git.example.com/fleet.git\n    aws: {clusterName: c, nodeRole: r}\n')
    codes = run.codes(text)
    assert "GP622" not in codes and "GP621" not in codes


def test_too_many_nodepool_labels(run):
    labels = ", ".join(f"example.com/l{i}: v" for i in range(98))
    text = BASE.replace("    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                        "    - name: train\n      gpu: A100-SXM4-80GB\n      labels: {" + labels + "}\n"
                        "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714}\n")
    text = edit(text, '      repoURL: https://git.example.com/fleet.git\n',
                '      repoURL: https://git.example.com/fleet.git\n    aws: {clusterName: c, nodeRole: r}\n')
    d = only(run(text), "GP624")
    assert (d.line, d.col) == position(text, "labels: {example.com/l0")
    assert "at most" in d.hint
    few = text.replace(labels, ", ".join(f"example.com/l{i}: v" for i in range(90)))
    assert "GP624" not in run.codes(few)


@pytest.mark.parametrize("length", [55, 56, 63])
def test_mig_pool_of_any_name_length_gets_a_mig_config_label_that_fits(run, length):
    """mig-manager reads the layout name from a node label (at most 63 characters): the
    content-addressed config name shortens the pool's part so that it always fits."""
    from gpuplan.identity import mig_config_name as config_name

    name = ("infer-" + "a" * 80)[:length]
    text = edit(BASE, "    - name: infer\n", f"    - name: {name}\n")
    text = edit(text, "pool: infer,", f"pool: {name},")
    assert "GP115" not in run.codes(text)
    rf = run.resolved(text)
    value = config_name(rf.pool_by_name[name])
    assert len(value) <= 63 and value.startswith("gpuplan-" + name[:40])


def test_long_name_is_fine_on_a_pool_without_mig(run):
    name = "train-" + "a" * 57
    text = edit(BASE, "    - name: train\n", f"    - name: {name}\n")
    text = edit(text, "pool: train,", f"pool: {name},")
    assert "GP115" not in run.codes(text)


@pytest.mark.parametrize("length,engine,bad", [(42, "flux", False), (43, "flux", True), (63, "flux", True),
                                               (63, "argocd", False)])
def test_fleet_name_in_flux_kustomization_labels(run, length, engine, bad):
    name = ("fleet-" + "x" * 80)[:length]
    text = edit(BASE, "metadata: {name: small}", f"metadata: {{name: {name}}}")
    text = edit(text, "      repoURL: https://git.example.com/fleet.git\n",
                f"      repoURL: https://git.example.com/fleet.git\n      engine: {engine}\n")
    diags = run(text)
    if not bad:
        assert "GP115" not in [d.code for d in diags]
        return
    d = only(diags, "GP115")
    assert (d.line, d.col) == position(text, name)
    assert "kustomize.toolkit.fluxcd.io/name" in d.message and d.hint == "shorten metadata.name to at most 42 characters"
