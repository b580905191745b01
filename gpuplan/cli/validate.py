"""`gpuplan validate FLEET`."""

from __future__ import annotations

import click

from gpuplan.cli._common import emit, exit_code, format_option, strict_option, verbose_option


@click.command()
@click.argument("fleet", type=click.Path(dir_okay=False))
@format_option
@strict_option
@verbose_option
@click.pass_context
def validate(ctx: click.Context, fleet: str, fmt: str, strict: bool, verbose: bool) -> None:
    """Validate FLEET (a fleet.yaml) and report every problem with its line.

    Exit 0 when valid, 1 when not (with --strict, warnings count too)."""
    from gpuplan.compiler import check_fleet

    checked = check_fleet(fleet)
    emit(checked.diagnostics, fmt, verbose=verbose)
    code = exit_code(checked.diagnostics, strict) if checked.resolved is not None else 1
    if fmt == "text" and not code:
        spec = checked.resolved.fleet.spec  # type: ignore[union-attr]
        click.echo(f"{fleet}: valid ({len(spec.pools)} pools, {len(spec.tiers)} tiers, "
                   f"{len(spec.tenants)} tenants)")
    ctx.exit(int(code))
