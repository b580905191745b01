"""What every command shares: rendering diagnostics and choosing the exit code.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import os
import sys
from typing import Mapping, Sequence

import click

from gpuplan.diagnostics import Diagnostic, Severity, has_errors
from gpuplan.exitcodes import ExitCode
from gpuplan.reporters.formats import FORMATS

format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
    help="How to print diagnostics: text (stderr), json, github annotations or sarif (stdout).",
)
strict_option = click.option("--strict", is_flag=True, help="Fail on warnings too.")
verbose_option = click.option("-v", "--verbose", is_flag=True, help="Show informational notes too (text format).")
outside_option = click.option(
    "--allow-inventory-outside-repo", "allow_outside", is_flag=True,
    help="Let the spec's inventory: entries name files outside its repository (absolute paths, "
    "'..'). Off by default: CI runs a spec from a pull request.",
)


def _color() -> bool:
    return "NO_COLOR" not in os.environ and sys.stderr.isatty()


def emit(diags: Sequence[Diagnostic], fmt: str, *, verbose: bool = False,
         sources: Mapping[str, str] | None = None) -> None:
    """Print diagnostics once. Text goes to stderr (the output of a compiler);
    machine formats go to stdout, where CI tools read them. Informational notes
    show in text only with --verbose (machine formats always carry them).
    ``sources``: the texts whose lines the text format may quote."""
    from gpuplan.reporters.formats import render, summary

    if fmt == "text":
        if not verbose:
            diags = [d for d in diags if d.severity is not Severity.INFO]
        if diags:
            click.echo(render("text", diags, color=_color(), sources=sources), err=True, nl=False)
            click.echo(summary(diags), err=True)
    else:
        click.echo(render(fmt, diags), nl=False)


def exit_code(diags: Sequence[Diagnostic], strict: bool) -> ExitCode:
    return ExitCode.INVALID if has_errors(diags, strict=strict) else ExitCode.OK
