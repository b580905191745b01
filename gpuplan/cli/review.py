"""`gpuplan review --base REF`: what a change of fleet.yaml does, against a git ref, in one command.

Checks REF out beside the work tree (a temporary `git worktree`), then runs `gpuplan plan FLEET
--base <REF's FLEET>` and `gpuplan diff FLEET --old <REF's tree>` and prints one document: what the
change does to the cluster first (disruptions, hand steps, the change from base, the migration
steps), then the generated objects, then the capacity after the change. `--format markdown` is the
pull-request report's document (`gpuplan.pr_report`, the GitHub Action, renders the same collected
runs), uncut. `--format github` is for a CI log: first the GitHub Actions workflow commands (an
`::error`/`::warning`/`::notice` per diagnostic of FLEET, at its file:line:col, then one per
disruption and hand step of the change, GP813/GP814, at the fleet.yaml line that causes it, else
at the file), then the text document, which a log shows as it is (Markdown it would not render);
the runner turns the command lines into annotations on the pull request's lines.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from gpuplan.exitcodes import ExitCode


@click.command()
@click.argument("fleet", type=click.Path(readable=False), default="fleet.yaml")
@click.option("--base", "base_ref", required=True, metavar="REF",
              help="The git ref to review against: a branch, tag or commit (main, HEAD~1, origin/main).")
@click.option("-o", "--output", default="generated", show_default=True,
              help="The generated tree, as committed (read at REF as the tree it deploys today).")
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "github")), default="text",
              show_default=True,
              help="text for a terminal; markdown for a pull request (the GitHub Action's document); github "
                   "for a CI step: annotations (diagnostics, disruptions, hand steps), then the text.")
def review(fleet: str, base_ref: str, output: str, fmt: str) -> None:
    """What FLEET's change since REF does: disruptions and hand steps first, then the generated
    objects, then capacity.

    Exit 0 with a review; 1 when either side's spec is invalid or a path is refused (the
    document says which and why); 2 when REF is not a commit of this repository."""
    from gpuplan import pr_report

    try:
        collected = (pr_report.collect(fleet, output, base_ref, Path.cwd(), fmt="text", annotate=pr_report.ANNOTATE)
                     if fmt == "github" else pr_report.collect(fleet, output, base_ref, Path.cwd(), fmt=fmt))
    except subprocess.CalledProcessError as exc:
        click.echo(f"gpuplan review: {base_ref!r} is not a commit of this repository "
                   f"(git {' '.join(exc.cmd[1:])}: {(exc.stderr or '').strip()})", err=True)
        sys.exit(ExitCode.USAGE)
    text = collected.render(None) if fmt == "markdown" else pr_report.render_text(collected)
    if fmt == "github":
        text = pr_report.annotations(collected) + text
    click.echo(text, nl=False)
    sys.exit(ExitCode.INVALID if pr_report.failed(collected) else ExitCode.OK)
