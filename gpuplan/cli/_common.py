"""What every command shares: rendering diagnostics and choosing the exit code."""

from __future__ import annotations

import os
import sys
from typing import Sequence

import click

from gpuplan.diagnostics import Diagnostic, has_errors
from gpuplan.exitcodes import ExitCode
from gpuplan.reporters import FORMATS

format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
    help="How to print diagnostics: text (stderr), json, github annotations or sarif (stdout).",
)
strict_option = click.option("--strict", is_flag=True, help="Fail on warnings too.")


def _color() -> bool:
    return "NO_COLOR" not in os.environ and sys.stderr.isatty()


def emit(diags: Sequence[Diagnostic], fmt: str) -> None:
    """Print diagnostics once. Text goes to stderr (the output of a compiler);
    machine formats go to stdout, where CI tools read them."""
    from gpuplan.reporters import render, summary

    if fmt == "text":
        if diags:
            click.echo(render("text", diags, color=_color()), err=True, nl=False)
            click.echo(summary(diags), err=True)
    else:
        click.echo(render(fmt, diags), nl=False)


def exit_code(diags: Sequence[Diagnostic], strict: bool) -> ExitCode:
    return ExitCode.INVALID if has_errors(diags, strict=strict) else ExitCode.OK
