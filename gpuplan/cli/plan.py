"""`gpuplan plan FLEET`: capacity, oversubscription and cost report.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.exitcodes import ExitCode

REPORT_FORMATS = ("text", "markdown", "json", "html", "github")


def _checked(path: str, *, allow: frozenset[str] = frozenset()):
    """Check a spec; return (resolved fleet or None, diagnostics, blocking?, source texts)."""
    from gpuplan.compiler import check_fleet
    from gpuplan.diagnostics import Severity

    checked = check_fleet(path)
    blocking = checked.resolved is None or any(
        d.severity is Severity.ERROR and d.code not in allow for d in checked.diagnostics)
    return checked.resolved, checked.diagnostics, blocking, checked.sources


@click.command()
@click.argument("fleet", type=click.Path(readable=False))
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="text", show_default=True,
              help="Report format. Diagnostics always go to stderr as text. github (with --base): "
                   "the change's disruptions and hand steps as GitHub Actions annotations at the "
                   "fleet.yaml lines that cause them (GP813, GP814), nothing else.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to this file instead of stdout.")
@click.option("--base", type=click.Path(readable=False), default=None,
              help="An older fleet.yaml: disruptive changes first (namespaces deleted, nodes repartitioned, "
                   "reconfigured or replaced, PriorityClasses recreated, driver upgrades), then capacity and cost.")
@click.option("--optimise", "--optimize", "optimise", is_flag=True,
              help="Propose MIG layouts for the declared demand, as a diff of FLEET.")
@click.pass_context
def plan(ctx: click.Context, fleet: str, fmt: str, output: str | None, base: str | None, optimise: bool) -> None:
    """Capacity report of FLEET: physical GPUs, advertised units, quota per tier
    and tenant, oversubscription, idle MIG slices and monthly cost.

    Exit 0 with a report; 1 when FLEET (or --base) is invalid, or when the
    layouts --optimise proposes still leave errors."""
    from gpuplan.cli._common import emit
    from gpuplan.capacity import capacity
    from gpuplan.report.render import render

    if fmt == "github" and (base is None or optimise):
        raise click.UsageError("--format github annotates a change: it needs --base, and no --optimise")
    # --optimise exists to repair layouts that do not meet the quotas; those errors do not block it
    allow = frozenset({"GP402", "GP410"}) if optimise else frozenset()
    rf, diags, blocking, sources = _checked(fleet, allow=allow)
    if diags:
        emit(diags, "text", sources=sources)
    if blocking or rf is None:
        ctx.exit(int(ExitCode.INVALID))
        return

    diff = None
    disruptive = trees = None
    if base is not None:
        old_rf, old_diags, old_blocking, old_sources = _checked(base)
        if old_blocking or old_rf is None:
            click.echo(f"gpuplan: the base spec {base} is not valid:", err=True)
            emit(old_diags, "text", sources=old_sources)
            ctx.exit(int(ExitCode.INVALID))
            return
        from gpuplan.compiler import render_files
        from gpuplan.kept import previous_configs
        from gpuplan.report.diff import capacity_diff
        from gpuplan.report.disruption import disruptions

        diff = capacity_diff(old_rf, rf)
        # what the controllers will do, from the two generated trees (listed first)
        old_tree = render_files(old_rf, base)
        # the new tree as a build over the base's would write it: config names
        # the base's nodes may still carry are kept (gpuplan.identity.kept_plugin_configs)
        rf.previous = previous_configs(rf, files=old_tree)
        trees = (old_tree, render_files(rf, base))
        from gpuplan.report.transition import tier_needs, tier_resources

        # a tier's running pods hold what the base spec gave them
        disruptive = disruptions(*trees, needs=tier_needs(rf), tiers={**tier_resources(rf), **tier_resources(old_rf)})

    opt = None
    if optimise:
        from gpuplan.report.optimise import optimise as run_optimise
        from gpuplan.spec.loader import read_source

        opt = run_optimise(rf, read_source(fleet, nofollow=True))  # the file checked above, never a link

    from gpuplan.compiler import placement_docs
    from gpuplan.placement.report import with_placement

    if fmt == "github":
        from gpuplan.report.annotations import change_diagnostics
        from gpuplan.reporters.formats import render as render_diagnostics

        _write(output, render_diagnostics("github", change_diagnostics(rf, disruptive or [])))
        ctx.exit(int(ExitCode.OK))
        return
    text = render(fmt, with_placement(rf, capacity(rf), placement_docs(rf)), diff=diff, optimise=opt,
                  disruption=disruptive)
    if base is not None:
        from gpuplan.report.migration import append_to_report, migration_plan

        text = append_to_report(fmt, text, migration_plan(old_rf, rf, trees))
    _write(output, text)

    code = ExitCode.OK
    if opt is not None and not opt.diff and any(d.severity.value == "error" for d in diags):
        click.echo("gpuplan: --optimise found no layouts that fix the errors above", err=True)
        code = ExitCode.INVALID
    elif opt is not None and opt.diagnostics:
        from gpuplan.diagnostics import has_errors

        if has_errors(opt.diagnostics):
            click.echo("gpuplan: the proposed layouts still leave errors:", err=True)
            emit([d for d in opt.diagnostics if d.severity.value == "error"], "text")
            code = ExitCode.INVALID
    elif opt is None and any(d.severity.value == "error" for d in diags):
        code = ExitCode.INVALID  # pragma: no cover - errors block above
    ctx.exit(int(code))


def _write(output: str | None, text: str) -> None:
    if output:
        with open(output, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
