"""Every gpuplan naming convention the importer recognises, in one place.

The importer reads a live cluster and must tell gpuplan's own marks (labels,
taints, config names) from the cluster's. gpuplan decides them in
``gpuplan.identity`` (resolve stage); they are read from there, so an import
recognises exactly what a build writes. Patterns that parse a name back
(``CONTENT_NAME``, ``DEFAULT_TIER_DESCRIPTION``) are the inverse of the
functions named beside them.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re

from gpuplan.dra.claims import DEVICE_PLUGIN_DEPLOY_LABEL, CHART_CLASSES as DRA_CHART_CLASSES  # noqa: F401
from gpuplan.identity import (  # noqa: F401 - the importer's vocabulary
    DEFAULT_TAINT as DEFAULT_KARPENTER_TAINT,
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_CONFIGMAP,
    DEFAULT_CONFIG as DEVICE_PLUGIN_DEFAULT_CONFIG,
    MANAGED_BY,
    MIG_ALL_DISABLED,
    MIG_CONFIG_LABEL,
    MIG_PARTED_CONFIG_KEY,
    MIG_PARTED_CONFIGMAP,
    OTHER_PRIORITIES_QUOTA,
    POOL_LABEL,
    POOL_TAINT_KEY,
    QUOTA_NAME,
    TENANT_LABEL,
    TIER_LABEL,
    TIER_NS_LABEL_PREFIX,
)

POOL_TAINT_EFFECT = "NoSchedule"  # identity.pool_binding_taint
(MANAGED_BY_LABEL, MANAGED_BY_VALUE), = MANAGED_BY.items()
PART_OF_LABEL = "app.kubernetes.io/part-of"  # gpuplan.lower.common.labels
TIER_QUOTA_PREFIX = "gpuplan-tier-"
PRIORITY_CLASS_PREFIX = "gpuplan-"  # identity.priority_class_name
CLAIM_TEMPLATE_PREFIX = "gpuplan-"  # gpuplan.dra.claims.claim_template_name: gpuplan-<tier>, gpuplan-<tier>-x<N>
# gpuplan/lower/tenancy.py _tier_description() (the default text)
DEFAULT_TIER_DESCRIPTION = re.compile(r"gpuplan tier (?P<tier>[a-z0-9-]+): (?P<resource>\S+) on pool (?P<pool>[a-z0-9-]+)\Z")
# identity.content_name() -> "<prefix>-<8 hex of sha256>"
CONTENT_NAME = re.compile(r"(?P<prefix>.+)-[0-9a-f]{8}\Z")
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # gpuplan/drift.py: MIG_STATE_LABEL
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"  # identity.nodepool_node_labels
# GPU Feature Discovery labels (NVIDIA/k8s-device-plugin gpu-feature-discovery, internal/lm)
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MIG_CAPABLE = "nvidia.com/mig.capable"
GFD_PRESENT = "nvidia.com/gpu.present"
# Karpenter (kubernetes-sigs/karpenter v1): gpuplan/drift.py KARPENTER_NODEPOOL_LABEL
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
KARPENTER_CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
DISCOVERY_TAG = "karpenter.sh/discovery"  # gpuplan/lower/karpenter.py: DISCOVERY_TAG
# gpuplan/spec/models.py: the Karpenter pool's default expireAfter
DEFAULT_EXPIRE_AFTER = "720h"
GPU = "nvidia.com/gpu"  # gpuplan/resolve.py: GPU, SHARED_SUFFIX
SHARED_SUFFIX = ".shared"

# Node labels and taints that Kubernetes, cloud providers, NFD, GFD, Karpenter or
# gpuplan set: never a pool's own `labels:`.
SYSTEM_LABEL_PREFIXES = (
    "kubernetes.io/", "beta.kubernetes.io/", "node.kubernetes.io/", "node-role.kubernetes.io/",
    "topology.kubernetes.io/", "failure-domain.beta.kubernetes.io/", "topology.k8s.aws/",
    "feature.node.kubernetes.io/", "nvidia.com/", "karpenter.sh/", "karpenter.k8s.aws/",
    "eks.amazonaws.com/", "k8s.amazonaws.com/", "cloud.google.com/", "gpuplan.dev/",
)
SYSTEM_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "karpenter.sh/",
                         "node-role.kubernetes.io/", "ToBeDeletedByClusterAutoscaler")
# Namespace labels gpuplan or Kubernetes own: never a tenant's `labels:`.
SYSTEM_NAMESPACE_LABELS = ("kubernetes.io/metadata.name", MANAGED_BY_LABEL, PART_OF_LABEL, TENANT_LABEL)
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")

# Fields the API server (not the author) writes; dropped before the round trip.
SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
                   "selfLink", "ownerReferences", "finalizers", "deletionTimestamp")
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision",
                      "karpenter.sh/nodepool-hash", "karpenter.sh/nodepool-hash-version",
                      "karpenter.k8s.aws/ec2nodeclass-hash", "karpenter.k8s.aws/ec2nodeclass-hash-version")

# Kueue (docs/kueue.md; gpuplan.lower.kueue, which the importer may not import)
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_CHART = "kueue"  # oci://registry.k8s.io/kueue/charts/kueue
KUEUE_NAMESPACE = "kueue-system"  # gpuplan.spec.models.KueueInstall.namespace default
# the chart writes managerConfig.controllerManagerConfigYaml into this ConfigMap
# (kueue charts/kueue/templates/manager/manager-config.yaml)
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_VALUES_PATH = "kueue/values.yaml"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # the lowest Topology level gpuplan always adds
# Volcano (docs/volcano.md; gpuplan.queueing.volcano.lower, a lowering target the importer does not import)
VOLCANO_GROUP = "scheduling.volcano.sh"  # Queue, PodGroup (v1beta1)
VOLCANO_CHART = "volcano"  # https://volcano-sh.github.io/helm-charts
VOLCANO_NAMESPACE = "volcano-system"  # gpuplan.spec.models.VolcanoInstall.namespace default
VOLCANO_VALUES_PATH = "volcano/values.yaml"
# the queues Volcano's controller makes itself (volcano-sh/volcano v1.15.1: `root`, the capacity
# plugin's hierarchy root, and `default`, where a PodGroup naming no queue goes); gpuplan writes neither
VOLCANO_OWN_QUEUES = ("root", "default")
# DRA (docs/dra.md; gpuplan.lower.dra)
DRA_CHART = "dra-driver-nvidia-gpu"
DRA_NAMESPACE = "dra-driver-nvidia-gpu"
DRA_VALUES_PATH = "dra-driver/values.yaml"
DRA_QUOTA_KEY = re.compile(r"(?P<cls>[a-z0-9.-]+)\.deviceclass\.resource\.k8s\.io/devices\Z")
GPU_OPERATOR_VALUES_PATH = "gpu-operator/values.yaml"
# The GPU Operator (NVIDIA/gpu-operator): the namespace gpuplan installs it in by default
# (spec.models.GpuOperator.namespace), the chart's operator Deployment and the ConfigMap of
# mig-parted configs the operator uses when the ClusterPolicy names none. The ClusterPolicy is
# cluster-scoped and the operator writes its status.namespace: evidence a tenant cannot forge.
OPERATOR_NAMESPACE = "gpu-operator"
OPERATOR_DEPLOYMENT = "gpu-operator"
OPERATOR_MIG_CONFIGMAP = "default-mig-parted-config"
