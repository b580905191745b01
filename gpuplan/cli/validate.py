"""`gpuplan validate FLEET...`.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.cli._common import emit, exit_code, format_option, outside_option, strict_option, verbose_option


@click.command()
@click.argument("fleets", metavar="FLEET", nargs=-1, required=True, type=click.Path(readable=False))
@format_option
@strict_option
@verbose_option
@outside_option
@click.pass_context
def validate(ctx: click.Context, fleets: tuple[str, ...], fmt: str, strict: bool, verbose: bool,
             allow_outside: bool) -> None:
    """Validate each FLEET (a fleet.yaml) and report every problem with its line.

    Exit 0 when all are valid, 1 when one is not (with --strict, warnings
    count too). Several specs (a pre-commit hook passes every staged one) are
    checked one after the other."""
    from gpuplan.compiler import Options, check_fleet
    from gpuplan.diagnostics import escape
    from gpuplan.spec.loader import display_path

    worst = 0
    collected = []  # machine formats print one document for all specs
    for fleet in fleets:
        checked = check_fleet(fleet, options=Options(allow_inventory_outside=allow_outside))
        if fmt == "text":
            emit(checked.diagnostics, fmt, verbose=verbose, sources=checked.sources)
        else:
            collected.extend(checked.diagnostics)
        code = exit_code(checked.diagnostics, strict) if checked.resolved is not None else 1
        if fmt == "text" and not code:
            spec = checked.resolved.fleet.spec  # type: ignore[union-attr]
            click.echo(f"{escape(display_path(fleet))}: valid ({len(spec.pools)} pools, {len(spec.tiers)} tiers, "
                       f"{len(spec.tenants)} tenants)")
        worst = max(worst, int(code))
    if fmt != "text":
        emit(collected, fmt)
    ctx.exit(worst)
