"""`gpuplan import INPUT... [-o FILE] [--force]`: a draft fleet.yaml from a running cluster.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import click

from gpuplan.cli._common import emit, format_option, verbose_option
from gpuplan.exitcodes import ExitCode


@click.command("import")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Write the draft here (default: stdout); an existing file only with --force.")
@click.option("--force", is_flag=True, help="Overwrite an existing --output file.")
@click.option("--name", "name", default=None, help="The fleet's name (default: from gpuplan's labels, else 'imported').")
@format_option
@verbose_option
@click.pass_context
def import_cmd(ctx: click.Context, inputs: tuple[str, ...], output: str | None, force: bool, name: str | None,
               fmt: str, verbose: bool) -> None:
    """Write the fleet.yaml that reproduces a running cluster, from objects you export without
    giving gpuplan credentials (files, directories, or `-` for stdin):

        kubectl get nodes,configmaps,priorityclasses,resourcequotas,namespaces -A -o json > cluster.json
        kubectl get clusterpolicies,nodepools,ec2nodeclasses -o json > operator.json
        gpuplan import cluster.json operator.json -o fleet.yaml

    Every inferred value carries a comment saying where it came from; what cannot be inferred is a
    `# TODO`. The draft is built back and compared with the cluster's objects; the summary (stderr)
    names each gpuplan convention behind a difference, and findings are diagnostics (GP950-GP965).
    With --format json/sarif/... the diagnostics go to stdout when the draft is written with -o,
    and to stderr when the draft itself goes to stdout.
    Exit 0 when a draft was written, 1 when the input is invalid, nothing could be imported or
    the output exists, 2 on usage errors."""
    from pathlib import Path

    from gpuplan.importer.pipeline import import_cluster

    display = output or "fleet.yaml"
    if output is not None:
        problem = _output_problem(Path(output), force)
        if problem is not None:
            emit([problem], fmt, verbose=verbose)
            ctx.exit(int(ExitCode.INVALID))
    result = import_cluster(inputs, name=name, display=display)
    if fmt != "text" and output is None:
        # the draft owns stdout: machine-format diagnostics go to stderr, so neither corrupts the other
        from gpuplan.reporters.formats import render

        click.echo(render(fmt, result.diagnostics), err=True, nl=False)
    else:
        emit(result.diagnostics, fmt, verbose=verbose, sources=result.sources)
    if fmt == "text":
        for line in result.summary:
            click.echo(line, err=True)
    if result.text is None:  # unreadable input or nothing to import (GP950)
        ctx.exit(int(ExitCode.INVALID))
    if output is None:
        click.echo(result.text, nl=False)
    else:
        _write(Path(output), result.text, force)
    ctx.exit(int(ExitCode.OK))


def _output_problem(path, force: bool):
    import os

    from gpuplan.importer.codes import E_EXISTS

    shown = path.as_posix()
    if os.path.islink(path):
        return E_EXISTS.diag(f"{shown} is a symbolic link; not written", file=shown)
    if os.path.lexists(path) and not force:
        return E_EXISTS.diag(f"{shown} exists; not overwritten", file=shown, hint="add --force to replace it")
    if os.path.lexists(path) and not os.path.isfile(path):
        return E_EXISTS.diag(f"{shown} is not a regular file; not written", file=shown)
    return None


def _write(path, text: str, force: bool) -> None:
    """A fresh temporary file beside ``path`` (O_EXCL), renamed over it: never a
    half-written fleet.yaml, never through a link."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent or "."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if not force and os.path.lexists(path):  # created meanwhile
            raise click.ClickException(f"{path.as_posix()} exists; not overwritten")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
