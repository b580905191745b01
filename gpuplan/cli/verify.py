"""`gpuplan verify [PATH...]`: manifests against the pinned upstream APIs.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.cli._common import emit, exit_code, format_option, strict_option, verbose_option


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--kubernetes-version", "k8s_version", default=None, metavar="X.Y",
              help="Kubernetes version of the core kinds' schemas (default: 1.33, the default of a fleet spec).")
@click.option("--base", "base", multiple=True, type=click.Path(exists=True),
              help="An earlier tree (file or directory): transition rules (oldSelf) run against its objects.")
@click.option("--cel-coverage", is_flag=True,
              help="Print which CEL rules of the pinned CRDs gpuplan evaluates, and exit.")
@format_option
@strict_option
@verbose_option
@click.pass_context
def verify(ctx: click.Context, paths: tuple[str, ...], k8s_version: str | None, base: tuple[str, ...],
           cel_coverage: bool, fmt: str, strict: bool, verbose: bool) -> None:
    """Verify Kubernetes manifests (files or directories, multi-document YAML)
    as the API server would admit them: strict upstream CRD schemas and every
    CRD CEL rule (pinned in gpuplan/upstream), core kinds through
    kubernetes-validate.

    Exit 0 when every object would be admitted, 1 when not (with --strict,
    warnings such as an unverified kind count too)."""
    if cel_coverage:
        from gpuplan.verify.cel import coverage, render_coverage

        cov = coverage()
        click.echo(render_coverage(cov), nl=False)
        ctx.exit(0 if not cov.left_out else 1)
    if not paths:
        raise click.UsageError("give at least one file or directory (or --cel-coverage)")
    from gpuplan.verify.verifier import DEFAULT_KUBERNETES_VERSION, Options, verify_paths

    result = verify_paths(list(paths), Options(kubernetes_version=k8s_version or DEFAULT_KUBERNETES_VERSION),
                          base=list(base) or None)
    emit(result.diagnostics, fmt, verbose=verbose, sources=result.sources)
    code = exit_code(result.diagnostics, strict)
    if fmt == "text":
        s = result.stats
        skipped = sum(s.not_evaluated.values())
        click.echo(
            f"{s.objects} objects in {s.files} files: {s.crd_objects} against pinned CRDs "
            f"({s.cel_evaluations} CEL rule evaluations), {s.core_objects} core, {s.not_verified} not verified"
            + (f"; {s.plain} plain-data documents (Helm values) skipped" if s.plain else "")
            + (f"; {skipped} rule evaluations left out (-v lists them)" if skipped and not verbose else "")
            + ("" if code else ": ok"), err=True)
    ctx.exit(int(code))
