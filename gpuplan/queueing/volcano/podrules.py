"""What a queued tier's pod must say with Volcano, as a validation of its class's own admission
policy (gpuplan.lower.admission ``class_validations``): every pod spec of the class names
``schedulerName: volcano``. A pod for the default scheduler would run outside every Queue's
accounting, where its ResourceQuota allows the borrow ceiling, which only the queue may give.

The rule lives in the class policy, not a policy of its own: a fleet that moves from Kueue to
Volcano swaps Kueue's rules for this one in one update of a policy whose binding already holds
(a new policy's binding syncs a wave after it: lower/common.py ``WAVES``), so no step of the
sync admits a queued pod under neither engine (GP529).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import json

from gpuplan.queueing.volcano.names import SCHEDULER


def queued_validations(pc: str) -> list[dict[str, str]]:
    lit = json.dumps  # class names are DNS subdomains: plain ASCII, as CEL string literals
    mine = f"variables.specs.filter(s, has(s.priorityClassName) && s.priorityClassName == {lit(pc)})"
    return [{"expression": f"{mine}.all(s, has(s.schedulerName) && s.schedulerName == {lit(SCHEDULER)})",
             "message": f"pods of queued PriorityClass {pc} are scheduled by Volcano (schedulerName: {SCHEDULER}), "
                        "in a PodGroup of one of their tenant's queues",
             "reason": "Forbidden"}]
