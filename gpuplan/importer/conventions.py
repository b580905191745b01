"""Every gpuplan naming convention the importer recognises, in one place.

The importer reads a live cluster and must tell gpuplan's own marks (labels,
taints, config names) from the cluster's. These conventions live today in
``gpuplan.lower`` (being moved to a resolve-level module); the importer must
not import the lowering targets, so each constant is repeated here with the
place gpuplan defines it. Repoint them when the resolve-level module lands.
"""

from __future__ import annotations

import re

# gpuplan/lower/common.py: POOL_LABEL, POOL_TAINT_KEY (binding taint <pool>:NoSchedule)
POOL_LABEL = "gpuplan.dev/pool"
POOL_TAINT_KEY = "gpuplan.dev/pool"
POOL_TAINT_EFFECT = "NoSchedule"
# gpuplan/lower/common.py: TENANT_LABEL, TIER_LABEL, MANAGED_BY
TENANT_LABEL = "gpuplan.dev/tenant"
TIER_LABEL = "gpuplan.dev/tier"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY_VALUE = "gpuplan"
# gpuplan/lower/tenancy.py: TIER_NS_LABEL_PREFIX, QUOTA_NAME, OTHER_PRIORITIES_QUOTA,
# priority_class_name() ("gpuplan-<tier>"), _tier_description() (the default text)
TIER_NS_LABEL_PREFIX = "tier.gpuplan.dev/"
QUOTA_NAME = "gpuplan-gpus"
OTHER_PRIORITIES_QUOTA = "gpuplan-other-priorities"
TIER_QUOTA_PREFIX = "gpuplan-tier-"
PRIORITY_CLASS_PREFIX = "gpuplan-"
DEFAULT_TIER_DESCRIPTION = re.compile(r"gpuplan tier (?P<tier>[a-z0-9-]+): (?P<resource>\S+) on pool (?P<pool>[a-z0-9-]+)\Z")
# gpuplan/lower/device_plugin.py: CONFIGMAP_NAME, DEFAULT_CONFIG; config_key() = common.content_name(<pool>, ...)
DEVICE_PLUGIN_CONFIGMAP = "gpuplan-device-plugin-config"
DEVICE_PLUGIN_DEFAULT_CONFIG = "gpuplan.default"
# gpuplan/lower/mig_parted.py: CONFIGMAP_NAME, CONFIG_KEY, ALL_DISABLED; config_name() = gpuplan-<pool>-<hash8>
MIG_PARTED_CONFIGMAP = "gpuplan-mig-parted-config"
MIG_PARTED_CONFIG_KEY = "config.yaml"
MIG_ALL_DISABLED = "all-disabled"
# gpuplan/lower/common.py: content_name() -> "<prefix>-<8 hex of sha256>"
CONTENT_NAME = re.compile(r"(?P<prefix>.+)-[0-9a-f]{8}\Z")
# gpuplan/lower/node_labels.py, gpuplan/lower/karpenter.py: the node labels that select configs
# (NVIDIA/k8s-device-plugin config-manager, NVIDIA/mig-parted nvidia-mig-manager)
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # gpuplan/drift.py: MIG_STATE_LABEL
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"  # gpuplan/lower/karpenter.py: _node_labels()
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
# gpuplan/spec/models.py: the Karpenter pool's default taint and expireAfter
DEFAULT_KARPENTER_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
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
