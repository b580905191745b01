"""Reports over a resolved fleet and its generated tree: the capacity report
(`gpuplan plan`, generated/CAPACITY.md), its diff against a base spec, the
disruption report and migration steps, the MIG optimiser. Report stage: reads
the capacity model (`gpuplan.capacity`), never a lowering target.

Stage: report (docs/architecture.md)."""
