"""GP115, GP621-GP626, GP632: values the API server or a controller would refuse, caught at their line.

A value of fleet.yaml that flows into a generated object is checked here with
the rule its consumer applies, so that nothing `gpuplan validate` accepts is
refused later by the API server (a CRD's CEL rules and schema), nfd-master, or
Karpenter:

* Karpenter NodePool ``spec.template.metadata.labels`` (CEL rules and
  ``maxProperties: 100`` of ``karpenter.sh_nodepools.yaml``,
  aws/karpenter-provider-aws v1.14.1): the pool's ``labels``;
* EC2NodeClass ``amiSelectorTerms[*].alias`` (``maxLength: 30`` and its CEL
  rules) and ``subnet/securityGroupSelectorTerms[*].tags`` (CEL "empty tag keys
  or values", ``maxProperties: 20``): ``karpenter.amiVersion``,
  ``cluster.aws.subnetTags`` / ``securityGroupTags``;
* nfd-master's label filter (kubernetes-sigs/node-feature-discovery v0.19.0,
  ``pkg/apis/nfd/validate/validate.go`` ``Label``, called by
  ``pkg/nfd-master/nfd-master.go`` ``filterFeatureLabel``): a static pool's
  ``labels``;
* label values derived from names (``nvidia.com/mig.config=gpuplan-<pool>``):
  at most 63 characters, reported at the name they come from;
* Argo CD Application names derived from the fleet's name: DNS-1123 subdomains
  (argoproj/argo-cd v3.5.1 ``util/argo/argo.go`` ``IsValidAppName``, and the API
  server's object-name rule);
* the EC2NodeClass ``role`` (``cluster.aws.nodeRole``): an IAM role name, which
  Karpenter passes to ``iam:AddRoleToInstanceProfile``.

``CEL_RULES`` lists every CEL rule of every CRD gpuplan emits with what
enforces it at the spec line, or why no spec value reaches it; a test checks
that the list covers the pinned CEL files exactly and evaluates the mirrored
rules with a real CEL engine on output built from specs these checks refuse.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import karpenter_pool, static_nodes
from gpuplan.resolve import PoolView, ResolvedFleet

MAX_LABEL_VALUE = 63  # k8s.io/apimachinery validation.LabelValueMaxLength
NODEPOOL_MAX_LABELS = 100  # NodePool spec.template.metadata.labels maxProperties
ALIAS_MAX_LENGTH = 30  # EC2NodeClass amiSelectorTerms[*].alias maxLength
SELECTOR_MAX_TAGS = 20  # EC2NodeClass subnet/securityGroupSelectorTerms[*].tags maxProperties

# NodePool CEL (spec.template.metadata.labels): the karpenter.k8s.aws labels a template may set.
KARPENTER_AWS_TEMPLATE_LABELS = frozenset((
    "karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition",
))
ALIAS_FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")

E_DERIVED_TOO_LONG = Code(
    "GP115", "derived name does not fit", Severity.ERROR,
    "gpuplan builds some names and label values from yours. With Flux, the fleet's name is part "
    "of Kustomization names (`gpuplan-<fleet>-gpu-operator`), which kustomize-controller writes "
    "into a label of every object it applies: a label value has at most 63 characters, so the "
    "fleet's name has at most 42. (Config names used as node label values, such as "
    "`nvidia.com/mig.config=gpuplan-<pool>-<hash>`, are shortened by gpuplan itself to fit.)",
    bad="metadata: {name: ml-platform-production-eu-west-1-primary-cluster}  # 47 chars, Flux",
    good="metadata: {name: ml-platform-prod-euw1}",
)
E_KARPENTER_LABEL = Code(
    "GP621", "node label in a domain Karpenter restricts", Severity.ERROR,
    "The NodePool CRD (Karpenter v1.14) refuses template labels in the `karpenter.sh` domain "
    "(except `karpenter.sh/capacity-type`), `kubernetes.io/hostname`, `karpenter.sh/nodepool`, "
    "and `karpenter.k8s.aws` labels outside its well-known list: the API server rejects the "
    "whole NodePool, and the pool launches no node.",
    bad="pools:\n  - name: burst\n    labels: {karpenter.sh/team: ml}\n    karpenter: {...}",
    good="pools:\n  - name: burst\n    labels: {example.com/team: ml}\n    karpenter: {...}",
)
E_NFD_LABEL = Code(
    "GP622", "node label nfd-master refuses", Severity.ERROR,
    "Static pools are labelled by an NFD NodeFeatureRule. nfd-master (NFD v0.19) refuses labels "
    "in `kubernetes.io` and its subdomains (`node.kubernetes.io`, `topology.kubernetes.io`, ...) "
    "other than `feature.node.kubernetes.io` and `profile.node.kubernetes.io`: the label is "
    "dropped with an error in nfd-master's log and never reaches the node.",
    bad="pools:\n  - name: train\n    labels: {node.kubernetes.io/role: gpu}\n    nodes: [gpu-1]",
    good="pools:\n  - name: train\n    labels: {example.com/role: gpu}\n    nodes: [gpu-1]",
)
W_NFD_PREFIX = Code(
    "GP623", "unprefixed node label gets NFD's prefix", Severity.WARNING,
    "nfd-master puts every label of a NodeFeatureRule that has no prefix into "
    "`feature.node.kubernetes.io/`: `team: ml` on a static pool becomes "
    "`feature.node.kubernetes.io/team=ml` on the node, and a nodeSelector on `team` matches "
    "nothing. Give the label a prefix of your own.",
    bad="pools:\n  - name: train\n    labels: {team: ml}\n    nodes: [gpu-1]",
    good="pools:\n  - name: train\n    labels: {example.com/team: ml}\n    nodes: [gpu-1]",
)
E_TOO_MANY_LABELS = Code(
    "GP624", "too many node labels for a NodePool", Severity.ERROR,
    "A NodePool template holds at most 100 labels (`maxProperties` in the CRD); gpuplan adds its "
    "own (pool, device-plugin and MIG config, operand switches) to the pool's `labels`.",
    bad="labels: {...}   # 98 labels on a Karpenter pool",
    good="labels: {...}   # at most 100 minus gpuplan's own",
)
E_AMI_ALIAS = Code(
    "GP625", "AMI version the EC2NodeClass refuses", Severity.ERROR,
    "The EC2NodeClass selects the AMI by alias `<family>@<amiVersion>`; the CRD refuses an alias "
    "longer than 30 characters or one that does not match `^[a-zA-Z0-9]+@.+$`, and Karpenter finds no "
    "AMI for a version not in the family's format (`v20260714` for AL2023, `v1.40.0` for Bottlerocket).",
    bad="karpenter: {amiFamily: Bottlerocket, amiVersion: v1.40.0-nvidia-2026-08-01, ...}",
    good="karpenter: {amiFamily: Bottlerocket, amiVersion: v1.40.0, ...}",
)
E_SELECTOR_TAGS = Code(
    "GP626", "subnet or security-group tags the EC2NodeClass refuses", Severity.ERROR,
    "`cluster.aws.subnetTags` and `securityGroupTags` become EC2NodeClass selector terms, whose CEL "
    "rules refuse an empty tag key or value (use `'*'` to match any value), and which hold at most "
    "20 tags.",
    bad="aws: {subnetTags: {kubernetes.io/role/internal-elb: ''}, ...}",
    good="aws: {subnetTags: {kubernetes.io/role/internal-elb: '1'}, ...}",
)

E_IAM_ROLE = Code(
    "GP632", "node role IAM refuses", Severity.ERROR,
    "`cluster.aws.nodeRole` becomes the EC2NodeClass `role`. Karpenter drops any path (everything up "
    "to the last `/`, so a role ARN works too) and attaches the role name to the instance profile it "
    "creates; IAM accepts role names of 1 to 64 characters from letters, digits and `+=,.@_-`. Any "
    "other name fails there, the EC2NodeClass never becomes ready and no node is launched.",
    bad="aws: {clusterName: ml-platform, nodeRole: \"Karpenter Node Role\"}",
    good="aws: {clusterName: ml-platform, nodeRole: KarpenterNodeRole-ml-platform}",
)

CODES = (E_DERIVED_TOO_LONG, E_KARPENTER_LABEL, E_NFD_LABEL, W_NFD_PREFIX, E_TOO_MANY_LABELS,
         E_AMI_ALIAS, E_SELECTOR_TAGS, E_IAM_ROLE)

# IAM CreateRole RoleName: pattern [\w+=,.@-]+, length 1-64 (IAM API Reference, CreateRole);
# \w there is ASCII [A-Za-z0-9_].
_IAM_ROLE_NAME = re.compile(r"[A-Za-z0-9_+=,.@-]{1,64}\Z")
MAX_SUBDOMAIN = 253  # k8s.io/apimachinery validation.DNS1123SubdomainMaxLength
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")

_ALIAS = re.compile(r"^[a-zA-Z0-9]+@.+$")  # EC2NodeClass CEL: self.matches('^[a-zA-Z0-9]+@.+$')
_AMI_VERSION = {
    "AL2023": (re.compile(r"v[0-9]{8}\Z"), "v20260714"),
    "Bottlerocket": (re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+\Z"), "v1.40.0"),
}


def _domain(key: str) -> str:
    """CEL ``key.find("^([^/]+)")``: the text before the first '/', or the whole key."""
    return key.split("/", 1)[0]


def karpenter_label_refusal(key: str) -> str | None:
    """Why the NodePool CRD refuses ``key`` as a template label (None: accepted).
    Mirrors the four CEL rules of ``spec.template.metadata.labels``, in order."""
    domain = _domain(key)
    if key not in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool") and domain.endswith("karpenter.sh"):
        return 'label domain "karpenter.sh" is restricted'
    if key == "karpenter.sh/nodepool":
        return 'label "karpenter.sh/nodepool" is restricted'
    if key == "kubernetes.io/hostname":
        return 'label "kubernetes.io/hostname" is restricted'
    if key not in KARPENTER_AWS_TEMPLATE_LABELS and domain.endswith("karpenter.k8s.aws"):
        return 'label domain "karpenter.k8s.aws" is restricted'
    return None


def nfd_label_refusal(key: str) -> str | None:
    """Why nfd-master v0.19.0 drops ``key`` (validate.Label; no -extra-label-ns for it)."""
    ns = key.rpartition("/")[0]
    if ns == "kubernetes.io" or ns.endswith(".kubernetes.io"):
        allowed = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")
        if ns not in allowed and not any(ns.endswith("." + a) for a in allowed):
            return f"namespace {ns!r} is not allowed"
    return None


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _flux_names(rf)
    yield from _argo_names(rf)
    for pv in rf.pools:
        if karpenter_pool(pv.pool):
            yield from _karpenter_labels(rf, pv)
            yield from _ami_alias(rf, pv)
        elif static_nodes(pv.pool):  # a node group's labels: its back-end's rules
            yield from _nfd_labels(rf, pv)
    yield from _selector_tags(rf)
    yield from _node_role(rf)


def _flux_names(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """kustomize-controller labels every object it applies with
    ``kustomize.toolkit.fluxcd.io/name=<Kustomization name>`` (fluxcd/kustomize-controller
    docs/spec/v1/kustomizations.md), so a Kustomization name is a label value too."""
    if rf.fleet.spec.cluster.gitops.engine != "flux":
        return
    from gpuplan.identity import app_name, operator_app_name

    longest = max((app_name(rf), operator_app_name(rf)), key=len)
    if len(longest) > MAX_LABEL_VALUE:
        fleet = rf.fleet.metadata.name
        room = MAX_LABEL_VALUE - (len(longest) - len(fleet))
        yield rf.diag(
            E_DERIVED_TOO_LONG,
            f"fleet name {fleet!r} ({len(fleet)} characters) makes the Flux Kustomization {longest!r}, whose name "
            f"kustomize-controller puts in the label kustomize.toolkit.fluxcd.io/name ({len(longest)} characters; "
            f"at most {MAX_LABEL_VALUE})",
            ("metadata", "name"),
            hint=f"shorten metadata.name to at most {room} characters",
        )


def argo_application_names(rf: ResolvedFleet) -> list[str]:
    """Every Application name gpuplan may derive from the fleet's name."""
    from gpuplan.identity import app_name, dra_app_name, kueue_app_name, operator_app_name

    return [app_name(rf), operator_app_name(rf), dra_app_name(rf), kueue_app_name(rf)]


def subdomain_problem(name: str) -> str | None:
    """Why ``name`` is not a DNS-1123 subdomain (apimachinery ``IsDNS1123Subdomain``), or None."""
    if len(name) > MAX_SUBDOMAIN:
        return f"{len(name)} characters; at most {MAX_SUBDOMAIN}"
    if not _SUBDOMAIN.match(name):
        return "not lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    return None


def _argo_names(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """Argo CD refuses an Application whose name is not a DNS-1123 subdomain (argoproj/argo-cd
    v3.5.1 util/argo/argo.go IsValidAppName), as the API server does for any object name. The
    63-character label limit does not apply: v3.5.1 tracks resources with the
    ``argocd.argoproj.io/tracking-id`` annotation unless argocd-cm sets another
    ``application.resourceTrackingMethod`` (util/settings/settings.go GetTrackingMethod: empty
    means annotation). A fleet name is a DNS label, so today this holds by construction; the
    check keeps it true if a derived name changes."""
    if rf.fleet.spec.cluster.gitops.engine != "argocd":
        return
    for name in argo_application_names(rf):
        why = subdomain_problem(name)
        if why is not None:
            yield rf.diag(
                E_DERIVED_TOO_LONG,
                f"fleet name {rf.fleet.metadata.name!r} makes the Argo CD Application name {name!r}, which "
                f"the API server refuses ({why})",
                ("metadata", "name"),
                hint="shorten metadata.name",
            )
            return


def _node_role(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """aws/karpenter-provider-aws pkg/providers/instanceprofile/instanceprofile.go ensureRole:
    ``roleName = lo.LastOr(strings.Split(roleName, "/"), roleName)`` then
    ``AddRoleToInstanceProfile(RoleName)``; IAM refuses names outside ``[\\w+=,.@-]{1,64}``."""
    aws = rf.fleet.spec.cluster.aws
    if aws is None or not any(pv.pool.karpenter is not None for pv in rf.pools):
        return
    role = aws.node_role.rsplit("/", 1)[-1]
    if _IAM_ROLE_NAME.match(role):
        return
    what = ("it ends with '/', so the name after the path is empty" if role == "" else
            f"{len(role)} characters; at most 64" if len(role) > 64 else
            "only letters, digits and +=,.@_- are allowed")
    yield rf.diag(
        E_IAM_ROLE,
        f"nodeRole {aws.node_role!r}: Karpenter attaches the IAM role {role!r} to the nodes' instance profile, "
        f"and IAM refuses that role name ({what})",
        ("spec", "cluster", "aws", "nodeRole"),
        hint="give the IAM role's name (or its ARN), e.g. KarpenterNodeRole-<cluster>",
    )


def _label_path(pv: PoolView, key: str) -> tuple:
    return pv.path + ("labels", key)


def _karpenter_labels(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    for key in pv.pool.labels:
        why = karpenter_label_refusal(key)
        if why is not None:
            yield rf.diag(
                E_KARPENTER_LABEL,
                f"pool {pv.name!r}: the NodePool CRD refuses template label {key!r} ({why}); the API "
                "server would reject the pool's NodePool",
                _label_path(pv, key), key=True,
                hint="use a label under a domain of your own, e.g. example.com/" + key.rpartition("/")[2],
            )
    from gpuplan.identity import nodepool_node_labels as _node_labels

    labels = _node_labels(rf, pv)
    total = len(labels)
    if total > NODEPOOL_MAX_LABELS:
        own = total - sum(1 for k in pv.pool.labels if labels.get(k) == pv.pool.labels[k])
        yield rf.diag(
            E_TOO_MANY_LABELS,
            f"pool {pv.name!r}: the NodePool template would carry {total} labels; the CRD allows "
            f"{NODEPOOL_MAX_LABELS}",
            pv.path + ("labels",), key=True,
            hint=f"keep at most {NODEPOOL_MAX_LABELS - own} labels of your own on a Karpenter pool",
        )


def _nfd_labels(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.identity import pool_node_labels

    emitted = pool_node_labels(rf, pv)
    for key in pv.pool.labels:
        if emitted.get(key) != pv.pool.labels[key]:
            continue  # a gpuplan label wins and the pool's value is not emitted
        why = nfd_label_refusal(key)
        if why is not None:
            yield rf.diag(
                E_NFD_LABEL,
                f"pool {pv.name!r}: nfd-master refuses node label {key!r} ({why}), so the pool's "
                "NodeFeatureRule never sets it",
                _label_path(pv, key), key=True,
                hint="use a label under a domain of your own, e.g. example.com/" + key.rpartition("/")[2],
            )
        elif "/" not in key:
            yield rf.diag(
                W_NFD_PREFIX,
                f"pool {pv.name!r}: nfd-master sets unprefixed label {key!r} as "
                f"'feature.node.kubernetes.io/{key}'",
                _label_path(pv, key), key=True,
                hint=f"give it a prefix of your own, e.g. example.com/{key}",
            )


def _ami_alias(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.identity import ami_alias

    k = pv.pool.karpenter
    assert k is not None
    alias = ami_alias(pv)
    where = pv.path + ("karpenter", "amiVersion")
    family = alias.split("@", 1)[0]
    if not _ALIAS.match(alias) or family not in ALIAS_FAMILIES:
        problem = "'alias' is improperly formatted, must match the format 'family@version'"
    elif len(alias) > ALIAS_MAX_LENGTH:
        problem = f"the alias is {len(alias)} characters; the CRD allows {ALIAS_MAX_LENGTH}"
    elif k.ami_version != "latest" and not _AMI_VERSION[k.ami_family][0].match(k.ami_version):
        problem = f"{k.ami_family} AMI versions look like {_AMI_VERSION[k.ami_family][1]}; Karpenter finds no AMI"
    else:
        return
    yield rf.diag(
        E_AMI_ALIAS,
        f"pool {pv.name!r}: amiVersion {k.ami_version!r} makes the EC2NodeClass alias {alias!r}: {problem}",
        where,
        hint=f"use latest or a release such as {_AMI_VERSION[k.ami_family][1]}",
    )


def _selector_tags(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    aws = rf.fleet.spec.cluster.aws
    if aws is None or not any(pv.pool.karpenter is not None for pv in rf.pools):
        return
    for field, tags in (("subnetTags", aws.subnet_tags), ("securityGroupTags", aws.security_group_tags)):
        if not tags:
            continue
        base = ("spec", "cluster", "aws", field)
        if len(tags) > SELECTOR_MAX_TAGS:
            yield rf.diag(E_SELECTOR_TAGS, f"{field} has {len(tags)} tags; an EC2NodeClass selector term "
                          f"holds at most {SELECTOR_MAX_TAGS}", base, key=True,
                          hint=f"select with at most {SELECTOR_MAX_TAGS} tags")
        for key, value in tags.items():
            if key == "" or value == "":
                yield rf.diag(
                    E_SELECTOR_TAGS,
                    f"{field}: empty tag {'key' if key == '' else 'value'} (EC2NodeClass CEL: empty tag keys or "
                    "values aren't supported)",
                    base + (key,), key=key == "",
                    hint="use '*' to match any value of a tag" if key else "name the tag key",
                )


# Every CEL rule of the CRDs gpuplan emits (pinned files: NodePool, EC2NodeClass and
# NodeOverlay of Karpenter v1.14.1; Flux HelmRelease v2, Kustomization v1, HelmRepository v1;
# Argo CD Application; NFD NodeFeatureRule; the last three have none), keyed by
# (CEL file, path, message), with what enforces it at the spec line or why no spec value
# reaches it.
_FIXED = "fixed by gpuplan: no spec value reaches it"
_UNUSED = "gpuplan never sets this field"
_NP = "nodepool-karpenter-v1.cel.json"
_NC = "ec2nodeclass-karpenter-v1.cel.json"
_NO = "nodeoverlay-karpenter-v1alpha1.cel.json"
_HR = "helmrelease-helm-v2.cel.json"
_KS = "kustomization-kustomize-v1.cel.json"
_LABELS = "$.spec.template.metadata.labels"
_REQ = "$.spec.template.spec.requirements"
_ALIAS_P = "$.spec.amiSelectorTerms[*].alias"
CEL_RULES: dict[tuple[str, str, str], str] = {
    (_NP, "$.spec", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
     "provisioning modes"): _UNUSED + " (replicas)",
    (_NP, "$.spec", "only 'limits.nodes' is supported on static NodePools"): _UNUSED + " (replicas)",
    (_NP, "$.spec", "'weight' is not supported on static NodePools"): _UNUSED + " (replicas)",
    (_NP, "$.spec.disruption.budgets", "'schedule' must be set with 'duration'"): _FIXED,
    (_NP, _LABELS, 'label domain "karpenter.sh" is restricted'): "GP621",
    (_NP, _LABELS, 'label "karpenter.sh/nodepool" is restricted'): "GP621",
    (_NP, _LABELS, 'label "kubernetes.io/hostname" is restricted'): "GP621",
    (_NP, _LABELS, 'label domain "karpenter.k8s.aws" is restricted'): "GP621",
    (_NP, "$.spec.template.spec.nodeClassRef", "nodeClassRef.group is immutable"): _FIXED,
    (_NP, "$.spec.template.spec.nodeClassRef", "nodeClassRef.kind is immutable"): _FIXED,
    (_NP, "$.spec.template.spec.nodeClassRef.group", "group may not be empty"): _FIXED,
    (_NP, "$.spec.template.spec.nodeClassRef.kind", "kind may not be empty"): _FIXED,
    (_NP, "$.spec.template.spec.nodeClassRef.name", "name may not be empty"): "GP105 (pool name)",
    (_NP, _REQ, "requirements with operator 'In' must have a value defined"):
        "GP109 (instanceTypes, capacityTypes and zones: at least one item)",
    (_NP, _REQ, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"):
        _UNUSED + " (numeric operators)",
    (_NP, _REQ, "requirements with 'minValues' must have at least that many values specified in the "
     "'values' field"): _UNUSED + " (minValues)",
    (_NP, _REQ + "[*].key", 'label domain "karpenter.sh" is restricted'): _FIXED + " (requirement keys)",
    (_NP, _REQ + "[*].key", 'label "karpenter.sh/nodepool" is restricted'): _FIXED + " (requirement keys)",
    (_NP, _REQ + "[*].key", 'label "kubernetes.io/hostname" is restricted'): _FIXED + " (requirement keys)",
    (_NP, _REQ + "[*].key", 'label domain "karpenter.k8s.aws" is restricted'): _FIXED + " (requirement keys)",
    (_NC, "$.spec", "must specify exactly one of ['role', 'instanceProfile']"): _FIXED + " (role only)",
    (_NC, "$.spec", "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"): _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"):
        _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"):
        _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"):
        _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"):
        _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"):
        _UNUSED + " (amiFamily)",
    (_NC, "$.spec", "must specify amiFamily if amiSelectorTerms does not contain an alias"): _FIXED + " (alias)",
    (_NC, "$.spec.amiSelectorTerms", "expected at least one, got none, ['tags', 'id', 'name', 'alias', "
     "'ssmParameter']"): _FIXED + " (alias)",
    (_NC, "$.spec.amiSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination of other "
     "fields in amiSelectorTerms"): _FIXED + " (alias)",
    (_NC, "$.spec.amiSelectorTerms", "'alias' is mutually exclusive, cannot be set with a combination of "
     "other fields in amiSelectorTerms"): _FIXED + " (alias)",
    (_NC, "$.spec.amiSelectorTerms", "'alias' is mutually exclusive, cannot be set with a combination of "
     "other amiSelectorTerms"): _FIXED + " (one term)",
    (_NC, _ALIAS_P, "'alias' is improperly formatted, must match the format 'family@version'"): "GP625",
    (_NC, _ALIAS_P, "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', "
     "'windows2019', 'windows2022', 'windows2025'"): "GP625 (family from amiFamily: al2023, bottlerocket)",
    (_NC, _ALIAS_P, "windows families may only specify version 'latest'"): _FIXED + " (no Windows family)",
    (_NC, "$.spec.amiSelectorTerms[*].tags", "empty tag keys or values aren't supported"): _UNUSED,
    (_NC, "$.spec.blockDeviceMappings", "must have only one blockDeviceMappings with rootVolume"): _FIXED,
    (_NC, "$.spec.blockDeviceMappings[*].ebs", "snapshotID or volumeSize must be defined"): _FIXED,
    (_NC, "$.spec.blockDeviceMappings[*].ebs", "snapshotID must be set when volumeInitializationRate is set"):
        _FIXED,
    (_NC, "$.spec.capacityReservationSelectorTerms", "expected at least one, got none, ['tags', 'id', "
     "'instanceMatchCriteria']"): _UNUSED,
    (_NC, "$.spec.capacityReservationSelectorTerms", "'id' is mutually exclusive, cannot be set along with "
     "other fields in a capacity reservation selector term"): _UNUSED,
    (_NC, "$.spec.capacityReservationSelectorTerms[*].tags", "empty tag keys or values aren't supported"): _UNUSED,
    (_NC, "$.spec.connectionTracking", "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout "
     "must be set"): _UNUSED,
    (_NC, "$.spec.instanceProfile", "instanceProfile cannot be empty"): _UNUSED,
    (_NC, "$.spec.kubelet", "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"): _UNUSED,
    (_NC, "$.spec.kubelet", "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"): _UNUSED,
    (_NC, "$.spec.kubelet", "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"): _UNUSED,
    (_NC, "$.spec.kubelet.evictionHard", "valid keys for evictionHard are ['memory.available','nodefs.available',"
     "'nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"): _UNUSED,
    (_NC, "$.spec.kubelet.evictionSoft", "valid keys for evictionSoft are ['memory.available','nodefs.available',"
     "'nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"): _UNUSED,
    (_NC, "$.spec.kubelet.evictionSoftGracePeriod", "valid keys for evictionSoftGracePeriod are "
     "['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree',"
     "'pid.available']"): _UNUSED,
    (_NC, "$.spec.kubelet.kubeReserved", "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage',"
     "'pid']"): _UNUSED,
    (_NC, "$.spec.kubelet.kubeReserved", "kubeReserved value cannot be a negative resource quantity"): _UNUSED,
    (_NC, "$.spec.kubelet.systemReserved", "valid keys for systemReserved are ['cpu','memory',"
     "'ephemeral-storage','pid']"): _UNUSED,
    (_NC, "$.spec.kubelet.systemReserved", "systemReserved value cannot be a negative resource quantity"): _UNUSED,
    (_NC, "$.spec.networkInterfaces", "networkInterfaces must include a primary interface with "
     "interfaceType='interface'"): _UNUSED,
    (_NC, "$.spec.networkInterfaces", "networkInterfaces must not have duplicate networkCardIndex and "
     "deviceIndex pairs, and can have at most one efa device per network card"): _UNUSED,
    (_NC, "$.spec.placementGroupSelector", "expected at least one, got none, ['name', 'id']"): _UNUSED,
    (_NC, "$.spec.placementGroupSelector", "'name' and 'id' are mutually exclusive"): _UNUSED,
    (_NC, "$.spec.role", "role cannot be empty"): "GP109 (cluster.aws.nodeRole: at least one character)",
    (_NC, "$.spec.securityGroupSelectorTerms", "securityGroupSelectorTerms cannot be empty"): _FIXED,
    (_NC, "$.spec.securityGroupSelectorTerms", "expected at least one, got none, ['tags', 'id', 'name']"): _FIXED,
    (_NC, "$.spec.securityGroupSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination "
     "of other fields in a security group selector term"): _FIXED + " (tags only)",
    (_NC, "$.spec.securityGroupSelectorTerms", "'name' is mutually exclusive, cannot be set with a combination "
     "of other fields in a security group selector term"): _FIXED + " (tags only)",
    (_NC, "$.spec.securityGroupSelectorTerms[*].tags", "empty tag keys or values aren't supported"): "GP626",
    (_NC, "$.spec.subnetSelectorTerms", "subnetSelectorTerms cannot be empty"): _FIXED,
    (_NC, "$.spec.subnetSelectorTerms", "expected at least one, got none, ['tags', 'id']"): _FIXED,
    (_NC, "$.spec.subnetSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination of other "
     "fields in a subnet selector term"): _FIXED + " (tags only)",
    (_NC, "$.spec.subnetSelectorTerms[*].tags", "empty tag keys or values aren't supported"): "GP626",
    (_NC, "$.spec.tags", "empty tag keys aren't supported"): _FIXED + " (gpuplan.dev/pool, gpuplan.dev/fleet)",
    (_NC, "$.spec.tags", "tag contains a restricted tag matching eks:eks-cluster-name"): _FIXED,
    (_NC, "$.spec.tags", "tag contains a restricted tag matching kubernetes.io/cluster/"): _FIXED,
    (_NC, "$.spec.tags", "tag contains a restricted tag matching karpenter.sh/nodepool"): _FIXED,
    (_NC, "$.spec.tags", "tag contains a restricted tag matching karpenter.sh/nodeclaim"): _FIXED,
    (_NC, "$.spec.tags", "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"): _FIXED,
    (_NO, "$.spec", "cannot set both 'price' and 'priceAdjustment'"): _UNUSED,
    (_NO, "$.spec.capacity", "invalid resource restricted"): _FIXED + " (nvidia.com resources only)",
    (_NO, "$.spec.requirements", "requirements with operator 'NotIn' must have a value defined"): _UNUSED,
    (_NO, "$.spec.requirements", "requirements with operator 'In' must have a value defined"):
        "GP109 (instanceTypes: at least one item)",
    (_NO, "$.spec.requirements", "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single "
     "positive integer value"): _UNUSED,
    (_NO, "$.spec.requirements[*].key", 'label domain "karpenter.sh" is restricted'): _FIXED,
    (_NO, "$.spec.requirements[*].key", 'label "kubernetes.io/hostname" is restricted'): _FIXED,
    (_NO, "$.spec.requirements[*].key", 'label domain "karpenter.k8s.aws" is restricted'): _FIXED,
    (_HR, "$.spec", "either chart or chartRef must be set"): _FIXED,
    (_HR, "$.spec.install.strategy", ".retryInterval cannot be set when .name is 'RemediateOnFailure'"): _UNUSED,
    (_HR, "$.spec.kubeConfig", "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must "
     "be specified"): _UNUSED,
    (_HR, "$.spec.upgrade.strategy", ".retryInterval can only be set when .name is 'RetryOnFailure'"): _UNUSED,
    (_KS, "$.spec.kubeConfig", "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must "
     "be specified"): _UNUSED,
}
