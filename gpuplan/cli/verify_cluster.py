"""`gpuplan verify-cluster FLEET --live FILE`."""

from __future__ import annotations

import sys

import click

from gpuplan.cli._common import emit, format_option, strict_option, verbose_option
from gpuplan.exitcodes import ExitCode


@click.command("verify-cluster")
@click.argument("fleet", type=click.Path(dir_okay=False))
@click.option("--live", "live", multiple=True, required=True, metavar="FILE",
              help="JSON from `kubectl get nodes,resourcequotas -A -o json`; `-` reads stdin. Repeatable.")
@format_option
@strict_option
@verbose_option
@click.pass_context
def verify_cluster(ctx: click.Context, fleet: str, live: tuple[str, ...], fmt: str, strict: bool,
                   verbose: bool) -> None:
    """Compare the cluster with FLEET after a sync: per pool, nodes missing labels or taints,
    advertised GPU resources, MIG config state; ResourceQuotas against the tree.

    Reads recorded `kubectl get -o json` output, so it needs no cluster credentials:

        kubectl get nodes,resourcequotas -A -o json | gpuplan verify-cluster fleet.yaml --live -

    Exit 0 when the cluster matches, 6 when it differs (with --strict, warnings count
    too), 1 when the spec or the input is invalid."""
    from gpuplan.compiler import check_fleet
    from gpuplan.diagnostics import has_errors
    from gpuplan.drift import LiveInputError, parse_live, verify

    checked = check_fleet(fleet)
    if checked.failed():
        emit(checked.diagnostics, fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    texts = []
    for name in live:
        if name == "-":
            texts.append(("<stdin>", sys.stdin.read()))
            continue
        try:
            with open(name, encoding="utf-8") as f:
                texts.append((name, f.read()))
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {name}: {exc}", param_hint="--live") from None
    try:
        parsed = parse_live(texts)
    except LiveInputError as exc:
        emit([exc.diag], fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    assert checked.resolved is not None
    result = verify(checked.resolved, parsed)
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
