"""`gpuplan nodes FLEET [-o FILE] [--count N] [--kwok]`: the Node objects each pool's nodes
register, as one `kind: List` for KWOK or a scheduler simulator (docs/nodes.md).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.exitcodes import ExitCode

# the targets whose objects put labels and taints on nodes (a missing node-group back-end is skipped)
NODE_TARGETS = ("gpuplan.lower.node_labels", "gpuplan.lower.karpenter", "gpuplan.lower.karpenter_aws",
                "gpuplan.lower.provision_gke", "gpuplan.lower.provision_aks", "gpuplan.lower.provision_capi")


@click.command("nodes")
@click.argument("fleet", type=click.Path(readable=False))  # the loader refuses a directory (GP013)
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write the List here, atomically (default: stdout).")
@click.option("--count", type=click.IntRange(min=0), default=None, metavar="N",
              help="N nodes per autoscaled pool (Karpenter, GKE, AKS, Cluster API) instead of its ceiling.")
@click.option("--kwok", is_flag=True,
              help="Mark every node for KWOK: annotation kwok.x-k8s.io/node=fake and label type=kwok.")
@click.pass_context
def nodes(ctx: click.Context, fleet: str, output: str, count: int | None, kwok: bool) -> None:
    """The Node objects FLEET's pools register, as the API server would hold them once the GPU
    stack runs: labels and taints from the generated NodePools, NodeFeatureRules and node-group
    templates, capacity from the machine tables and the device-plugin config, Ready.

    Static pools: one Node per listed node. Autoscaled pools: their ceiling (NodePool
    limits.nodes, node-group max size), or --count N each. Sorted by name, byte-identical
    for the same spec:

        gpuplan nodes fleet.yaml --kwok | kubectl create -f -

    Exit 0 with the List; 1 when FLEET is invalid (its diagnostics on stderr) or FILE
    cannot be written."""
    from gpuplan.cli._common import emit
    from gpuplan.compiler import check_fleet, planned_objects
    from gpuplan.report.nodes import NodeNameClash, fleet_nodes, kinds, render

    checked = check_fleet(fleet)
    if checked.diagnostics:
        emit(checked.diagnostics, "text", sources=checked.sources)
    if checked.failed():
        ctx.exit(int(ExitCode.INVALID))
        return
    assert checked.resolved is not None
    rf = checked.resolved
    try:
        items = fleet_nodes(rf, planned_objects(rf, NODE_TARGETS, kinds()), count=count, kwok=kwok)
    except NodeNameClash as exc:
        click.echo(f"gpuplan nodes: {exc}", err=True)
        ctx.exit(int(ExitCode.INVALID))
        return
    data = render(items)
    if output == "-":
        click.echo(data, nl=False)
    else:
        from pathlib import Path

        from gpuplan.output.atomic import write_atomic

        path = Path(output)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        except OSError as exc:
            click.echo(f"gpuplan nodes: cannot write {path}: {exc.strerror or exc}", err=True)
            ctx.exit(int(ExitCode.INVALID))
            return
        click.echo(f"wrote {output} ({len(items)} node{'s' if len(items) != 1 else ''})", err=True)
    ctx.exit(int(ExitCode.OK))
