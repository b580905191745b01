"""Cluster API pools and the Cluster Autoscaler (docs/capi.md): each rule on a spec that breaks it.

Upstream behaviour modelled: kubernetes/autoscaler@cluster-autoscaler-1.36.1
cluster-autoscaler/ (cloudprovider/clusterapi/, processors/customresources/gpu_processor.go,
clusterstate/clusterstate.go), kubernetes-sigs/cluster-api@v1.14.0, and the kubelet's
``--node-labels`` check (kubernetes/kubernetes cmd/kubelet/app/options/options.go)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules.helpers import Run, edit, only, position

EXAMPLE = (Path(__file__).parents[2] / "examples" / "onprem-capi.yaml").read_text()

NOTEBOOKS_SHARING = "      sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}\n"


def test_the_example_is_clean(tmp_path):
    diags = Run(tmp_path)(EXAMPLE)
    assert [(d.code, d.message) for d in diags if d.severity.value in ("error", "warning")] == []


# --- GP675: nodes the autoscaler counts unready (kubernetes/autoscaler#8095) ------------------


def test_an_autoscaled_pool_with_renamed_shared_gpus_is_refused(tmp_path):
    """gpu_processor.go:41-70 FilterOutNodesWithUnreadyResources: a node with the GPU label and no
    allocatable nvidia.com/gpu is unready; renamed time-slicing advertises only nvidia.com/gpu.shared."""
    text = edit(EXAMPLE, NOTEBOOKS_SHARING, "      sharing: {mode: time-slicing, replicas: 4, renameByDefault: true}\n")
    d = only(Run(tmp_path)(text), "GP675")
    assert d.is_error and "notebooks-l40s" in d.message and "nvidia.com/gpu.shared" in d.message
    assert (d.line, d.col) == position(text, "{mode: time-slicing, replicas: 4, renameByDefault: true}")
    assert "capi.minNodes: 6" in d.hint


def test_a_mig_pool_that_advertises_only_mig_resources_must_be_fixed_size(tmp_path):
    run = Run(tmp_path)
    assert "GP675" not in run.codes(EXAMPLE)  # infer-a100: minNodes 3 = 24 GPUs / 8
    text = edit(EXAMPLE, "        maxGPUs: 24\n        minNodes: 3\n", "        maxGPUs: 24\n        minNodes: 1\n")
    d = only(run(text), "GP675")
    assert "infer-a100" in d.message and "nvidia.com/mig-1g.10gb" in d.message


def test_a_mig_layout_that_leaves_a_gpu_whole_advertises_nvidia_com_gpu_and_may_scale(tmp_path):
    """The readiness filter asks only for allocatable nvidia.com/gpu > 0 (utils/gpu/gpu.go:137-146):
    a MIG-disabled GPU of the node is enough."""
    text = edit(EXAMPLE, "        maxGPUs: 24\n        minNodes: 3\n", "        maxGPUs: 24\n        minNodes: 1\n")
    text = edit(text, "          - devices: [6, 7]\n            layout: {3g.40gb: 2}\n", "          - devices: [6, 7]\n")
    text = edit(text, "      profile: 3g.40gb\n", "")  # inference-large now hands out the whole GPUs
    assert "GP675" not in Run(tmp_path).codes(text)


# --- GP679: the scale-from-zero template's labels and taints ----------------------------------


def test_an_autoscaler_before_1_27_1_cannot_scale_the_pools_from_zero(tmp_path):
    text = edit(EXAMPLE, "autoscalerVersion: 1.36.1", "autoscalerVersion: 1.26.8")
    d = only(Run(tmp_path)(text), "GP679")
    # train-h100 starts at zero; notebooks-l40s keeps one node (a real node is its template)
    assert "train-h100" in d.message and "notebooks-l40s" not in d.message and d.is_error
    assert (d.line, d.col) == position(text, "1.26.8")
    assert "GP679" not in Run(tmp_path).codes(edit(EXAMPLE, "autoscalerVersion: 1.36.1", "autoscalerVersion: 1.27.1"))


# --- GP676 / GP693: --gpu-total ------------------------------------------------------------------


def test_gpu_total_must_name_every_labelled_pools_accelerator(tmp_path):
    """README.md:510-518: the --gpu-total type must equal the cluster-api/accelerator value."""
    text = edit(EXAMPLE, "        - {type: l40s, max: 96}", "        - {type: nvidia-l40s, max: 96}")
    d = only(Run(tmp_path)(text), "GP676")
    assert "notebooks-l40s" in d.message and "cluster-api/accelerator=l40s" in d.message
    # the fixed-size MIG pool has no accelerator label, so it needs no --gpu-total type
    assert "infer-a100" not in d.message


def test_an_own_accelerator_value_is_what_gpu_total_must_name(tmp_path):
    text = edit(EXAMPLE, "        - {type: l40s, max: 96}", "        - {type: nvidia-l40s, max: 96}")
    text = edit(text, "        infrastructureRef: {kind: Metal3MachineTemplate, name: l40s-4u}\n",
                "        infrastructureRef: {kind: Metal3MachineTemplate, name: l40s-4u}\n        accelerator: nvidia-l40s\n")
    assert "GP676" not in Run(tmp_path).codes(text)


def test_gpu_total_counts_advertised_nvidia_com_gpu(tmp_path):
    """gpu_processor.go:91-92: the count is the node's allocatable nvidia.com/gpu, so the notebooks
    pool at its ceiling (6 nodes x 4 GPUs x 4 replicas) needs 96, not 24."""
    text = edit(EXAMPLE, "        - {type: l40s, max: 96}", "        - {type: l40s, max: 24}")
    d = only(Run(tmp_path)(text), "GP693")
    assert "96 nvidia.com/gpu" in d.message and d.severity.value == "warning"
    assert (d.line, d.col) == position(text, "24}")


# --- GP677: labels the kubelet sets itself ----------------------------------------------------


def test_a_kubernetes_io_label_the_kubelet_refuses(tmp_path):
    text = edit(EXAMPLE, "        node.kubernetes.io/gpu-role: training\n", "        node-role.kubernetes.io/gpu: training\n")
    d = only(Run(tmp_path)(text), "GP677")
    assert "node-role.kubernetes.io/gpu" in d.message and d.is_error
    assert (d.line, d.col) == position(text, "node-role.kubernetes.io/gpu")


def test_labels_the_kubelet_may_set():
    from gpuplan.rules.capi import kubelet_may_set

    assert kubelet_may_set("node.kubernetes.io/gpu-role")
    assert kubelet_may_set("team.kubelet.kubernetes.io/x")
    assert kubelet_may_set("topology.kubernetes.io/zone")
    assert kubelet_may_set("gpuplan.dev/pool") and kubelet_may_set("cluster-api/accelerator")
    assert not kubelet_may_set("node-role.kubernetes.io/worker")
    assert not kubelet_may_set("example.k8s.io/x")


# --- GP678, GP691, GP692 ----------------------------------------------------------------------


def test_scale_from_zero_without_cpu_and_memory_is_a_warning(tmp_path):
    """clusterapi_unstructured.go:285-296 CanScaleFromZero needs cpu and memory."""
    text = edit(EXAMPLE, '        cpu: "224"\n', "")
    d = only(Run(tmp_path)(text), "GP678")
    assert "train-h100" in d.message and d.severity.value == "warning"
    # notebooks-l40s keeps a node: the autoscaler builds its template from that node
    assert "GP678" not in Run(tmp_path).codes(edit(EXAMPLE, '        cpu: "64"\n', ""))


def test_a_capi_pool_needs_cluster_capi(tmp_path):
    start = EXAMPLE.index("    capi:\n      clusterName")
    end = EXAMPLE.index("\n  pools:")
    text = EXAMPLE[:start] + EXAMPLE[end + 1:]
    assert "GP691" in Run(tmp_path).codes(text)


def test_a_capi_pool_needs_gpus_per_node(tmp_path):
    text = edit(EXAMPLE, "      gpu: H100-SXM5-80GB\n      gpusPerNode: 8\n", "      gpu: H100-SXM5-80GB\n")
    d = only(Run(tmp_path)(text), "GP692")
    assert "train-h100" in d.message


def test_a_pool_name_too_long_for_a_machine_deployment(tmp_path):
    """core/webhooks/admission/machinedeployment.go:157: the name must be a label value (<= 63)."""
    long = "n" * 56  # gpuplan- + 56 = 64
    text = EXAMPLE.replace("notebooks-l40s", long)
    d = only(Run(tmp_path)(text), "GP694")
    assert f"gpuplan-{long}" in d.message and "55 characters" in d.hint
    assert "GP694" not in Run(tmp_path).codes(EXAMPLE.replace("notebooks-l40s", "n" * 55))


def test_kubelet_flags_gpuplan_writes_itself_are_refused_at_the_spec_line(tmp_path):
    """Two node-labels entries would break the KubeadmConfigTemplate's CEL rule (kubeletExtraArgs
    name must be unique) and the pool's identity: the spec says so where it is written."""
    from gpuplan.compiler import check_fleet

    text = edit(EXAMPLE, '      capi:\n        infrastructureRef: {kind: Metal3MachineTemplate, name: l40s-4u}\n',
                '      capi:\n        infrastructureRef: {kind: Metal3MachineTemplate, name: l40s-4u}\n'
                '        kubeletExtraArgs: {config-dir: /etc/x}\n')
    text = edit(text, '        maxNodeProvisionTime: 45m\n        kubeletExtraArgs: {provider-id: "metal3://{{ ds.meta_data.providerid }}"}\n'
                '      pricePerGPUHour: 0.80', '        maxNodeProvisionTime: 45m\n      pricePerGPUHour: 0.80')
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    [d] = [d for d in check_fleet(p).diagnostics if d.is_error]
    assert "config-dir" in d.message and (d.line, d.col) == position(text, "{config-dir: /etc/x}")


def test_the_pool_must_be_at_least_one_machine_and_hold_its_minimum(tmp_path):
    """clusterapi_nodegroup.go:568-576: a max size of 0 is no node group; the ceiling is whole machines."""
    run = Run(tmp_path)
    d = only(run(edit(EXAMPLE, "        maxGPUs: 32\n", "        maxGPUs: 4\n")), "GP692")
    assert "less than one machine" in d.message
    text = edit(EXAMPLE, "        maxGPUs: 24\n        minNodes: 3\n", "        maxGPUs: 24\n        minNodes: 4\n")
    d = only(run(text), "GP692")
    assert "minNodes 4 is above the ceiling of 3 machines" in d.message
    assert (d.line, d.col) == position(text, "4\n        kubeletExtraArgs", 0)


def test_the_bootstrap_kubelet_drop_in_needs_a_kubelet_that_reads_it(tmp_path):
    """The KubeadmConfigTemplate writes the topology settings as a --config-dir drop-in, read only
    from 1.31 without the alpha switch (gpuplan.k8sversions, as for static pools)."""
    text = edit(EXAMPLE, 'kubernetesVersion: "1.33"', 'kubernetesVersion: "1.29"')
    d = only(Run(tmp_path)(text), "GP631")
    assert d.path == "spec.pools[0].topology"  # train-h100


def test_static_cpu_manager_needs_a_reservation_in_the_bootstrap_drop_in_too(tmp_path):
    """kubeadm's base KubeletConfiguration reserves no CPU; the kubelet refuses cpuManagerPolicy
    static without one (as for a static pool's drop-in, GP607)."""
    text = edit(EXAMPLE, 'topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}',
                "topology: {policy: restricted, scope: pod}")
    d = only(Run(tmp_path)(text), "GP607")
    assert "train-h100" in d.message


@pytest.mark.parametrize("value", ['"external --node-labels=gpuplan.dev/pool=train-h100"',
                                   '"external\\n--register-with-taints=a=b:NoSchedule"',
                                   "\"x' --config-dir=/tmp/x\"", '"$(id)"', '"{{ \'a --b\' }}"'])
def test_a_kubelet_flag_value_cannot_carry_more_flags(tmp_path, value):
    """kubeadm joins kubeletExtraArgs into one line that systemd splits at whitespace
    (cmd/kubeadm/app/phases/kubelet/flags.go:77-80): a value that holds a space, a newline or a
    quote would put `--node-labels` or `--register-with-taints`, which gpuplan owns, on the kubelet's
    command line. Refused at the value's line; a cloud-init variable stays allowed."""
    from gpuplan.compiler import check_fleet

    good = '"metal3://{{ ds.meta_data.providerid }}"'
    assert good in EXAMPLE
    text = EXAMPLE.replace(good, value, 1)
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    [d] = [d for d in check_fleet(p).diagnostics if d.is_error]
    assert d.code == "GP104" and "provider-id" in d.message and "more flags" in d.message
    assert d.line == text[:text.index(value)].count("\n") + 1
    p.write_text(EXAMPLE, encoding="utf-8")
    assert not [d for d in check_fleet(p).diagnostics if d.is_error]


def test_a_fixed_size_mig_pool_carries_no_gpu_label_and_no_warning(tmp_path):
    """GP975 is for platforms that label the nodes themselves: gpuplan leaves cluster-api/accelerator
    off the fixed-size infer-a100, so the autoscaler never counts its nodes unready."""
    assert "GP975" not in Run(tmp_path).codes(EXAMPLE)
