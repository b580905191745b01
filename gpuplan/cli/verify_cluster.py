"""`gpuplan verify-cluster FLEET --live FILE`.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.cli._common import emit, format_option, strict_option, verbose_option
from gpuplan.exitcodes import ExitCode


@click.command("verify-cluster")
@click.argument("fleet", type=click.Path(readable=False))  # the loader refuses a directory (GP013)
@click.option("--live", "live", multiple=True, required=True, metavar="FILE",
              help="JSON from `kubectl get nodes,resourcequotas,validatingadmissionpolicies,validatingadmissionpolicybindings -A -o json`; `-` reads stdin. Repeatable; "
              "regular files and stdin only, 64 MiB in all.")
@click.option("--tree", "tree", default="generated", show_default=True, metavar="DIR",
              help="The generated tree the cluster syncs: the old config names it keeps for Karpenter nodes "
              "that still carry them are accepted, and those no node carries any more (GP886), like kept "
              "namespaces the cluster no longer has (GP887, with `namespaces` in the input), are named with "
              "the command that retires them (docs/transitions.md). Not read when it does not exist.")
@format_option
@strict_option
@verbose_option
@click.pass_context
def verify_cluster(ctx: click.Context, fleet: str, live: tuple[str, ...], fmt: str, strict: bool,
                   verbose: bool, tree: str) -> None:
    """Compare the cluster with FLEET after a sync: per pool, nodes missing labels or taints,
    advertised GPU resources, MIG config state; ResourceQuotas against the tree.

    Reads recorded `kubectl get -o json` output, so it needs no cluster credentials:

        kubectl get nodes,resourcequotas,validatingadmissionpolicies,validatingadmissionpolicybindings -A -o json \\
          | gpuplan verify-cluster fleet.yaml --live -

    Exit 0 when the cluster matches, 6 when it differs (with --strict, warnings count
    too), 1 when the spec or the input is invalid."""
    from gpuplan.compiler import PLANNED_ADMISSION_AND_QUEUES, check_fleet, planned_objects, planned_quotas
    from gpuplan.diagnostics import has_errors
    from gpuplan.drift import MAX_LIVE_BYTES, Live, LiveInputError, parse_live, read_live, verify

    checked = check_fleet(fleet)
    if checked.failed():
        emit(checked.diagnostics, fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    # one input read and parsed at a time, within one byte and value budget for all of them
    parsed = Live()
    used = 0
    try:
        for name in live:
            shown, raw = read_live(name, MAX_LIVE_BYTES - used)
            used += len(raw)
            parse_live([(shown, raw)], parsed)
            del raw
    except LiveInputError as exc:
        emit(exc.diags, fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    assert checked.resolved is not None
    rf = checked.resolved
    import os

    if os.path.isdir(tree):
        from gpuplan.kept import previous_configs

        rf.previous = previous_configs(rf, out_dir=tree)
    result = verify(rf, parsed, planned_quotas(rf), planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES))
    from gpuplan.diagnostics import normalise

    diags = normalise(result.diagnostics)
    emit(diags, fmt, verbose=verbose)
    if fmt == "text":
        for p in result.pools:
            planned = f"{p.planned} planned" if p.planned is not None else "autoscaled"
            click.echo(f"pool {p.pool}: {len(p.ok)}/{len(p.found)} nodes as planned ({planned})")
        if not parsed.saw_quotas:
            click.echo("ResourceQuotas: none in the input, not checked")
    ctx.exit(int(ExitCode.DRIFT if has_errors(diags, strict=strict) else ExitCode.OK))
