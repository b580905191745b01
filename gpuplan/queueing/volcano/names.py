"""Volcano's names that other stages write onto nodes and pods (volcano-sh/volcano v1.15.1).

Stage: foundation (docs/architecture.md)."""

NODE_GROUP_LABEL = "volcano.sh/nodegroup-name"  # pkg/scheduler/plugins/nodegroup/nodegroup.go:34
SCHEDULER = "volcano"  # the chart's scheduler name (values.yaml custom.scheduler_name, default)
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # staging/.../apis/scheduling/v1beta1/labels.go:48
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # staging/.../apis/scheduling/v1beta1/labels.go:32
