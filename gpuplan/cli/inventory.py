"""`gpuplan inventory pull`: collect the node probes' inventories into the repo.

Exit codes: 0 written (skipped ConfigMaps are warnings on stderr); 1 kubectl is
missing, failed or printed something unexpected, or a file could not be
written; 2 bad command line.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import click

from gpuplan.exitcodes import ExitCode


@click.group("inventory")
def inventory() -> None:
    """Collect node-probe inventories into the repository."""


@inventory.command("pull")
@click.option("-n", "--namespace", default="gpuplan-system", show_default=True,
              help="Namespace the node-probe publishes to.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default="inventory",
              show_default=True, help="Directory for <node>.yaml (or .json) files.")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="File format. JSON reads ~13x faster: worth it from a few hundred nodes.")
@click.option("--context", default=None, help="kubeconfig context (kubectl --context).")
@click.option("--kubectl", "kubectl", default="kubectl", show_default=True, envvar="GPUPLAN_KUBECTL",
              help="kubectl binary.")
@click.option("--chunk-size", type=click.IntRange(1, 10000), default=500, show_default=True,
              help="Objects per LIST page.")
@click.option("--prune", is_flag=True,
              help="Remove inventory files of nodes that no longer publish or are no longer in the cluster "
                   "(reads the Node list).")
@click.pass_context
def pull(ctx: click.Context, namespace: str, out_dir: str, context: str | None, kubectl: str,
         chunk_size: int, prune: bool, fmt: str) -> None:
    """Read every node's inventory ConfigMap and write OUTPUT/<node>.yaml (or .json)."""
    from gpuplan.probe.pull import (
        PullError, inventories_from_list, kubectl_command, node_names, nodes_command, run_kubectl, write_inventories,
    )
    from gpuplan.diagnostics import escape

    cmd = kubectl_command(kubectl=kubectl, namespace=namespace, context=context, chunk_size=chunk_size)
    try:
        listing = run_kubectl(cmd)
    except PullError as exc:
        click.echo(f"gpuplan inventory pull: {escape(str(exc))}", err=True)
        ctx.exit(int(ExitCode.INVALID))
        return
    nodes = None
    if prune:
        # ConfigMaps outlive deleted nodes (the probe sets no owner reference
        # unless it may read Nodes); the Node list tells which are stale
        try:
            nodes = node_names(run_kubectl(nodes_command(kubectl=kubectl, context=context, chunk_size=chunk_size)))
        except PullError as exc:
            click.echo(f"gpuplan inventory pull: warning: cannot list nodes ({escape(str(exc))}); "
                       "inventories of deleted nodes are kept", err=True)
    invs, warnings = inventories_from_list(listing, nodes=nodes)
    for w in warnings:
        click.echo(f"gpuplan inventory pull: warning: {escape(w)}", err=True)
    try:
        res = write_inventories(Path(out_dir), invs, prune=prune, fmt=fmt)
    except OSError as exc:
        click.echo(f"gpuplan inventory pull: cannot write {out_dir}: {exc.strerror or exc}", err=True)
        ctx.exit(int(ExitCode.INVALID))
        return
    for w in res.warnings:  # a node whose file could not be written: the others are
        click.echo(f"gpuplan inventory pull: warning: {escape(w)}", err=True)
    if not invs:
        click.echo(f"gpuplan inventory pull: no inventories published in namespace {namespace}", err=True)
    click.echo(
        f"gpuplan inventory pull: {len(invs)} nodes: {len(res.written)} written, "
        f"{len(res.unchanged)} unchanged, {len(res.removed)} removed ({out_dir})"
        + (f", {len(res.failed)} not written" if res.failed else ""),
        err=True,
    )
    ctx.exit(int(ExitCode.INVALID if res.failed else ExitCode.OK))
