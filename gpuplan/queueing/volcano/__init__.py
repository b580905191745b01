"""Volcano (``queueing.engine: volcano``): docs/volcano.md.

``queues`` (resolve) turns the queue ledger into Volcano's hierarchical Queues; ``rules``
(check) refuses what Volcano cannot hold; ``lower`` (lower) writes the Queues, the scheduler
configuration and the chart; ``admission`` (lower) keeps a queued tier's pods inside the
Volcano scheduler and each PodGroup in its tenant's queues; ``boundary`` (check-objects) is
what the boundary proof tries against it.

Stage: foundation (docs/architecture.md)."""
