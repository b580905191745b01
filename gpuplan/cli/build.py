"""`gpuplan build`, `gpuplan check`, `gpuplan diff`: the spec against the generated tree.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import click

from gpuplan.cli._common import emit, format_option, outside_option, strict_option, verbose_option
from gpuplan.exitcodes import ExitCode

# Not click's exists/dir_okay/readable checks (a usage error, exit 2): the
# loader refuses a directory (GP013), an unreadable file (GP010) or a symlink
# (GP015) as invalid input, exit 1.
fleet_argument = click.argument("fleet", type=click.Path(readable=False))
output_option = click.option(
    "-o", "--output", "out_dir", default="generated", show_default=True,
    type=click.Path(), help="The generated tree.",
)


def _compile(fleet: str, out_dir: str, fmt: str, strict: bool, verbose: bool, allow_outside: bool = False,
             verify: bool = False, files=None, retire: frozenset[str] = frozenset(),
             retire_namespaces: frozenset[str] = frozenset(), extra: list | None = None,
             retire_resources: frozenset[str] = frozenset(), advance: frozenset[str] = frozenset()):
    """Compile (in memory, unless ``files`` takes the bytes: then the spec's
    positions are freed once checked, as nothing after reads them); print
    diagnostics (and ``extra``, in the same report); None when the spec is invalid."""
    from gpuplan.compiler import Options, compile_fleet

    compiled = compile_fleet(fleet, out_dir=out_dir, files=files,
                             options=Options(strict=strict, allow_inventory_outside=allow_outside, verify=verify,
                                             release_spec=files is not None, retire_configs=retire,
                                             retire_namespaces=retire_namespaces,
                                             retire_resources=retire_resources, advance=advance))
    from gpuplan.diagnostics import normalise

    emit(normalise(compiled.diagnostics + (extra or [])), fmt, verbose=verbose, sources=compiled.sources)
    if compiled.rejected:
        return compiled
    if compiled.resolved is None or not compiled.files:
        return None
    return compiled


def _refuse_tree_path(ctx: click.Context, out_dir: str, fleet: str, fmt: str, option: str = "-o") -> None:
    """Exit 1 before anything is read or written when the tree's path is a
    symlink or leads out of the spec's repository (GP807), or is a file (GP804)."""
    import os

    from gpuplan.output.tree import OUTPUT_DIR, output_path_problem

    problem = output_path_problem(out_dir, fleet, option=option)
    if problem is None and os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        problem = OUTPUT_DIR.diag("the output path exists and is not a directory", file=out_dir)
    if problem is not None:
        emit([problem], fmt)
        ctx.exit(int(ExitCode.INVALID))


@click.command()
@fleet_argument
@output_option
@click.option("--force", is_flag=True,
              help="Overwrite generated files edited by hand, and a person's file at a path gpuplan produces.")
@click.option("--retire-config", "retire", multiple=True, metavar="NAME",
              help="Drop a device-plugin or mig-parted config name the tree keeps for old Karpenter nodes (the "
                   "ConfigMaps' gpuplan.dev/kept-configs annotation) once no node carries it. Repeatable.")
@click.option("--retire-namespace", "retire_ns", multiple=True, metavar="NAMESPACE",
              help="Drop a namespace the Argo CD AppProject keeps as a destination after it left the tree (the "
                   "project's gpuplan.dev/kept-namespaces annotation) once the root sync has pruned its objects "
                   "(or the namespace is deleted). Repeatable.")
@click.option("--retire-resource", "retire_res", multiple=True, metavar="RESOURCE",
              help="Drop a GPU resource name (e.g. nvidia.com/mig-1g.10gb) the namespaces' gpuplan-gpus quotas "
                   "keep at 0 after the spec stopped advertising it, once no node advertises it. Repeatable.")
@click.option("--advance", "advance", multiple=True, metavar="POOL",
              help="Move the next step of a static pool's rollout: its next nodes (rollout.maxUnavailable) take the "
                   "pool's new MIG layout or sharing. Run it once the last step's nodes are done (`kubectl get nodes "
                   "-l gpuplan.dev/pool=POOL -L nvidia.com/mig.config.state`). Repeatable.")
@format_option
@strict_option
@verbose_option
@outside_option
@click.pass_context
def build(ctx: click.Context, fleet: str, out_dir: str, force: bool, retire: tuple[str, ...],
          retire_ns: tuple[str, ...], retire_res: tuple[str, ...], advance: tuple[str, ...], fmt: str, strict: bool,
          verbose: bool, allow_outside: bool) -> None:
    """Compile FLEET into the generated tree (default: generated/).

    The tree is written to a temporary directory and swapped in whole; files
    gpuplan generated before and no longer produces are removed; files it did
    not generate are kept; a generated file edited by hand stops the build
    (exit 1) unless --force. The tree is verified first as `gpuplan verify`
    does; one the API server would reject is not written (exit 7)."""
    from gpuplan.output.tree import TreeWriter

    _refuse_tree_path(ctx, out_dir, fleet, fmt)
    # Each file goes to the new tree as it is rendered (memory holds hashes, not
    # the output); the tree is swapped in only by commit, after verification.
    with TreeWriter(Path(out_dir), force=force) as tree:
        compiled = _compile(fleet, out_dir, fmt, strict, verbose, allow_outside, verify=True, files=tree,
                            retire=frozenset(retire), retire_namespaces=frozenset(retire_ns),
                            retire_resources=frozenset(retire_res), advance=frozenset(advance))
        if compiled is None:
            ctx.exit(int(ExitCode.INVALID))
        if compiled.rejected:
            ctx.exit(int(ExitCode.REJECTED))
        result = tree.commit()
    if result.diagnostics:
        emit(result.diagnostics, fmt, verbose=verbose)
    if not result.ok:  # refused: nothing changed (GP806 leftovers are a warning: the tree is written)
        ctx.exit(int(ExitCode.INVALID))
    if fmt == "text":
        click.echo(
            f"{out_dir}: {len(compiled.files)} files "
            f"({len(result.written)} written, {len(result.removed)} removed, {len(result.unchanged)} unchanged)"
        )
        from gpuplan.provisioning.rollout import rollout_lines

        for line in rollout_lines(compiled.resolved, fleet):
            click.echo(line)


base_option = click.option(
    "--base", "base_dir", default=None, type=click.Path(),
    help="The base branch's generated tree (what the cluster was synced from): the tree's kept state "
         "(kept AppProject destinations and config names) must be there too, or the change widens "
         "what the cluster accepts (GP811). A missing directory is a base without a tree.")


def _judge(fleet: str, tree_label: str, tree_docs, base_dir: str) -> list:
    """GP811: the kept state of the tree (``tree_docs``) that the base tree does not have."""
    from gpuplan.kept import docs_of, judge

    return judge(tree_docs, tree_label, docs_of(root=base_dir), Path(base_dir).as_posix(), fleet)


@click.command()
@fleet_argument
@output_option
@base_option
@format_option
@verbose_option
@outside_option
@click.pass_context
def check(ctx: click.Context, fleet: str, out_dir: str, base_dir: str | None, fmt: str, verbose: bool,
          allow_outside: bool) -> None:
    """Exit 3 with a unified diff when the generated tree does not match FLEET;
    exit 1 when, with --base, it keeps state the base tree does not have."""
    from gpuplan.output.tree import NOT_READ, TREE_CHANGED, TreeCheck, TreeError

    _refuse_tree_path(ctx, out_dir, fleet, fmt)
    judged: list = []
    if base_dir is not None:
        from gpuplan.kept import docs_of

        _refuse_tree_path(ctx, base_dir, fleet, fmt, option="--base")
        judged = _judge(fleet, Path(out_dir).as_posix(), docs_of(root=out_dir), base_dir)
    try:
        # each file is compared with the disk as it is rendered; only those that differ are kept
        tree = TreeCheck(Path(out_dir))
        compiled = _compile(fleet, out_dir, fmt, False, verbose, allow_outside, files=tree, extra=judged)
        if compiled is None:
            ctx.exit(int(ExitCode.INVALID))
        result = tree.result()
    except TreeError as exc:  # a file in the tree that gpuplan cannot have written
        emit([exc.diagnostic], fmt)
        ctx.exit(int(ExitCode.INVALID))
    if result.ok:
        if judged:  # reported with the spec's diagnostics
            ctx.exit(int(ExitCode.INVALID))
        if fmt == "text":
            click.echo(f"{out_dir}: up to date ({len(compiled.files)} files)")
        return
    from gpuplan.diagnostics import escape

    # line by line, so a value in a generated or committed file cannot pass
    # for a workflow command in a CI log (the diff stays one line per line)
    click.echo("\n".join(escape(line) for line in result.diff.split("\n")), nl=False)
    if fmt != "text":  # per-file annotations for CI (text users read the diff)
        emit(result.diagnostics, fmt)
    else:  # files that were not compared byte for byte: the diff alone does not say why
        emit([d for d in result.diagnostics if d.code in (NOT_READ.code, TREE_CHANGED.code)], fmt)
    click.echo(f"{out_dir}: stale; run `gpuplan build {fleet}" + (f" -o {out_dir}" if out_dir != "generated" else "")
               + "` and commit the result", err=True)
    ctx.exit(int(ExitCode.STALE))


@click.command()
@fleet_argument
@output_option
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
@click.option("--old", "old_dir", default=None, type=click.Path(),
              help="Compare with the generated tree in this directory (e.g. the base branch's) "
                   "instead of the one at -o; headers still name the spec as seen from -o.")
@click.pass_context
def diff(ctx: click.Context, fleet: str, out_dir: str, fmt: str, old_dir: str | None) -> None:
    """Object-level changes FLEET makes to the generated tree (added, removed,
    changed objects with their changed fields), fit for a pull-request comment.
    Disruptive changes come first: namespaces that leave the tree, nodes that
    are repartitioned or reconfigured, pools whose nodes are replaced,
    PriorityClasses that are recreated, driver upgrades, and namespaces whose running pods
    keep GPUs a tier's revoked grant no longer covers."""
    # -o too when --old is read: the pull-request report derives --old from -o
    _refuse_tree_path(ctx, out_dir, fleet, "text")
    if old_dir is not None:
        _refuse_tree_path(ctx, old_dir, fleet, "text", option="--old")
    compiled = _compile(fleet, out_dir, "text", False, False)
    if compiled is None:
        ctx.exit(int(ExitCode.INVALID))
    from gpuplan.output.objdiff import diff_objects, render_markdown, render_text, tree_objects
    from gpuplan.output.tree import TreeError, read_tree

    unread: list = []  # files of the old tree left out (too large, vanished): warnings
    try:
        old = read_tree(Path(old_dir or out_dir), unread)
    except TreeError as exc:
        emit([exc.diagnostic], "text")
        ctx.exit(int(ExitCode.INVALID))
    if unread:
        emit(unread, "text")
    from gpuplan.report import disruption

    a, b = tree_objects(old), tree_objects(compiled.files)  # parsed once for both reports
    from gpuplan.report.transition import tier_needs, tier_resources

    try:
        ds = disruption.disruptions_of(a, b, tier_needs(compiled.resolved), old_tree=old_dir or out_dir,
                                       tiers=tier_resources(compiled.resolved))
    except TreeError as exc:  # objects of the old tree no report can read (GP839)
        emit([exc.diagnostic], "text")
        ctx.exit(int(ExitCode.INVALID))
    d = diff_objects(a, b)
    judged = []
    if old_dir is not None:  # the base tree: kept state this change adds shows first
        from gpuplan.kept import docs_of

        judged = _judge(fleet, Path(out_dir).as_posix(), docs_of(files=compiled.files), old_dir)
    if fmt == "markdown":
        head = _kept_markdown(judged) + disruption.render_markdown(ds)
        click.echo(head + "\n" + render_markdown(d, max_chars=60_000 - len(head)), nl=False)
    else:
        click.echo(_kept_text(judged) + disruption.render_text(ds) + "\n" + render_text(d), nl=False)


def _kept_markdown(judged: list) -> str:
    """GP811 findings as the first block of the diff, escaped like every Markdown string."""
    if not judged:
        return ""
    lines = ["**Kept state the base tree does not have** (GP811: this change widens what the cluster "
             "accepts)", ""]
    from gpuplan.report.markdown import md_code, md_text

    lines += [f"- {md_text(d.message)} Fix: {md_code(d.hint)}" for d in judged]
    return "\n".join(lines) + "\n\n"


def _kept_text(judged: list) -> str:
    if not judged:
        return ""
    return "".join(f"error[GP811]: {d.message}\n  hint: {d.hint}\n" for d in judged) + "\n"
