"""#28 item 6: prerequisites in generated/README.md that are true — nodeadm's drop-in path for
static EKS AL2023 nodes, what an older Karpenter lacks, the DRA caveats of docs/dra.md."""

from __future__ import annotations

from tests.outputkit import fleet

CLUSTER = ("    aws: {clusterName: t, nodeRole: KarpenterNodeRole-t}\n"
           "    gpuOperator: {toolkit: preinstalled}\n  pools:\n")


def _readme(build, pools: str) -> str:
    return build(fleet(CLUSTER + pools)).files["README.md"].decode()


def test_static_eks_al2023_nodes_get_the_nodeadm_nodeconfig(build):
    # awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/kubelet/config.go:31-35,351-354: --config-dir is
    # /etc/kubernetes/kubelet/config.json.d, passed only when the NodeConfig has spec.kubelet.config
    text = _readme(build, """\
    - name: train
      gpu: L40S
      gpusPerNode: 4
      nodes: [n1]
      os: amzn2023
      topology: {policy: restricted, scope: pod}
""")
    section = text.split("### Files to install on static nodes", 1)[1].split("## Tiers", 1)[0]
    assert "/etc/kubernetes/kubelet/config.json.d" in section
    assert "kind: NodeConfig" in section and "topologyManagerPolicy: restricted" in section
    assert "never read" in section


def test_ubuntu_static_nodes_keep_the_kubeadm_instructions(build):
    text = _readme(build, """\
    - name: train
      gpu: L40S
      gpusPerNode: 4
      nodes: [n1]
      os: ubuntu22.04
      topology: {policy: restricted, scope: pod}
""")
    assert "kind: NodeConfig" not in text and "config.json.d" not in text


def test_karpenter_floor_says_what_older_releases_lack(build):
    # NodeOverlay from kubernetes-sigs/karpenter v1.7.0; capacityReservationSelectorTerms from
    # aws/karpenter-provider-aws v1.3.0, ReservedCapacity on by default from v1.6.0
    text = _readme(build, """\
    - name: burst
      gpu: H100-SXM5-80GB
      sharing: {mode: time-slicing, replicas: 2, renameByDefault: true}
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714, nodeOverlay: true,
                  capacityTypes: [reserved], capacityReservations: [{id: cr-0123456789abcdef0}]}
""")
    line = " ".join(text.split("**Karpenter v1.11**", 1)[1].split("\n- ", 1)[0].split())
    assert "Releases before v1.11 ignore the NodePools' `limits.nodes`" in line
    assert "before v1.7 have no NodeOverlay" in line
    assert "before v1.3 the EC2NodeClass has no `capacityReservationSelectorTerms`" in line
    assert "before v1.6 the `ReservedCapacity` feature gate is off by default" in line


def test_every_version_floor_says_what_older_releases_lack(examples):
    """Each "<tool> vX or later" of the prerequisites names what a release before it lacks,
    with the upstream source: Argo CD (argoproj/argo-cd v3.0.0
    docs/operator-manual/upgrading/2.14-3.0.md:234-238, annotation tracking by default; #17866
    `Force=true` in v2.12.0; #12448 `Delete=false` in v2.7.0; #10432 multi-source in v2.6.0;
    #9711 server-side apply in v2.5.0), Flux (the API versions' first controller releases),
    Karpenter (#2526 `limits.nodes`, first in v1.11.0)."""
    import re

    seen = set()
    for engine, compiled in examples.items():
        text = compiled.files["README.md"].decode()
        prereq = text.split("## Prerequisites", 1)[1].split("\n## ", 1)[0]
        for bullet in prereq.split("\n- "):
            flat = " ".join(bullet.split())
            if "or later" not in flat:
                continue
            floor = re.search(r"\*\*([A-Za-z ]+?) v?[0-9.]+\*\* or later|^\*\*(Flux)\*\*", flat)
            assert floor, flat
            seen.add(floor.group(1) or floor.group(2))
            assert re.search(r"before v[0-9]|first in", flat), flat  # what an older release lacks
            assert re.search(r"#[0-9]+|`[\w./-]+\.(go|md)", flat), flat  # and where upstream says so
    assert {"Argo CD", "Flux", "Karpenter"} <= seen


def test_dra_fleet_readme_has_the_validator_caveat(examples):
    # docs/dra.md "Not covered": the validator's plugin-validation restarts on DRA nodes of a mixed fleet
    from pathlib import Path

    from tests.outputkit import EXAMPLES, compile_ok

    dra = Path(EXAMPLES["argocd"]).parent / "dra.yaml"
    text = compile_ok(dra).files["README.md"].decode()
    section = text.split("### DRA caveats", 1)[1].split("## Tiers", 1)[0]
    assert "`plugin-validation`" in section and "`infer-a100`" in section
    assert section.count("`infer-a100`") >= 2  # the pool list and its MIG bullet
    assert "### DRA caveats" not in examples["argocd"].files["README.md"].decode()


def test_the_argo_cd_floor_is_what_the_tree_uses():
    """The Kueue chart's Application reads an OCI registry, which Argo CD serves from v3.1.0
    (argoproj/argo-cd docs/user-guide/oci.md); without Kueue the floor is v3.0 (tracking-id)."""
    from tests.outputkit import REPO, compile_ok

    for example, floor in (("kueue", "v3.1"), ("fleet", "v3.0")):
        readme = compile_ok(REPO / "examples" / f"{example}.yaml").files["README.md"].decode()
        [line] = [ln for ln in readme.splitlines() if ln.startswith("- **Argo CD v")]
        assert line.startswith(f"- **Argo CD {floor}** or later"), (example, line)
