"""`gpuplan verify-cluster FLEET --live FILE`.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import click

from gpuplan.cli._common import emit, format_option, strict_option, verbose_option
from gpuplan.exitcodes import ExitCode


class _TreeFiles(Mapping[str, bytes]):
    """The files of the tree at ``root`` (``gpuplan.kept.previous_configs`` reads a few by
    their tree path), each read when asked for through the manifest reader `gpuplan verify`
    uses: a regular file inside the tree, bounded in size, nesting, aliases and numbers. One
    that cannot be read or loaded (a directory or a link out of the tree in its place, a
    YAML error, a 5,000-digit integer) is absent, with its GP830/GP845 diagnostic in
    ``diagnostics``; one that is not there is absent. ``listed``: the paths the mapping
    lists (the reader asks for its evidence files among them)."""

    def __init__(self, root: str, listed: list[str]) -> None:
        self.root = root
        self.listed = listed
        self.diagnostics: list = []
        self._read: dict[str, bytes | None] = {}

    def __getitem__(self, path: str) -> bytes:
        if path not in self._read:
            self._read[path] = self._load(path)
        got = self._read[path]
        if got is None:
            raise KeyError(path)
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self.listed)

    def __len__(self) -> int:
        return len(self.listed)

    def _load(self, path: str) -> bytes | None:
        import os
        from pathlib import Path

        from gpuplan.verify.manifests import E_OUTSIDE, E_READ, read_file

        file = os.path.join(self.root, path)
        shown = Path(file).as_posix()
        if not os.path.lexists(file):
            return None
        real, root = os.path.realpath(file), os.path.realpath(self.root)
        if not real.startswith(root.rstrip(os.sep) + os.sep):
            self.diagnostics.append(E_OUTSIDE.diag(f"{shown}: a symbolic link out of the tree; not read", file=shown,
                                                   hint="restore the file from git, or rebuild the tree"))
            return None
        sources: dict[str, str] = {}
        try:
            _, diags = read_file(Path(real), shown, sources=sources)
        except (OSError, ValueError, RecursionError) as exc:  # defence in depth: the reader reports its own
            diags = [E_READ.diag(f"cannot read {shown}: {exc}", file=shown)]
        errors = [d for d in diags if d.is_error]
        if errors or shown not in sources:
            self.diagnostics += errors
            return None
        return sources[shown].encode("utf-8")


@click.command("verify-cluster")
@click.argument("fleet", type=click.Path(readable=False))  # the loader refuses a directory (GP013)
@click.option("--live", "live", multiple=True, required=True, metavar="FILE",
              help="JSON from `kubectl get nodes,resourcequotas,validatingadmissionpolicies,validatingadmissionpolicybindings -A -o json` "
              "(with queueing.engine volcano, also `queues.scheduling.volcano.sh`); `-` reads stdin. Repeatable; "
              "regular files and stdin only, 64 MiB in all.")
@click.option("--tree", "tree", default="generated", show_default=True, metavar="DIR",
              help="The generated tree the cluster syncs: the old config names it keeps for Karpenter nodes "
              "that still carry them are accepted, and those no node carries any more (GP886), like kept "
              "namespaces the cluster no longer has (GP887, with `namespaces` in the input), are named with "
              "the command that retires them (docs/transitions.md). Not read when it does not exist.")
@format_option
@strict_option
@verbose_option
@click.pass_context
def verify_cluster(ctx: click.Context, fleet: str, live: tuple[str, ...], fmt: str, strict: bool,
                   verbose: bool, tree: str) -> None:
    """Compare the cluster with FLEET after a sync: per pool, nodes missing labels or taints,
    advertised GPU resources, MIG config state; ResourceQuotas against the tree; with
    queueing.engine volcano, the Volcano Queues (`queues.scheduling.volcano.sh` in the input).

    Reads recorded `kubectl get -o json` output, so it needs no cluster credentials:

        kubectl get nodes,resourcequotas,validatingadmissionpolicies,validatingadmissionpolicybindings -A -o json \\
          | gpuplan verify-cluster fleet.yaml --live -

    Exit 0 when the cluster matches, 6 when it differs (with --strict, warnings count
    too), 1 when the spec or the input is invalid."""
    from gpuplan.compiler import PLANNED_ADMISSION_AND_QUEUES, check_fleet, planned_objects, planned_quotas
    from gpuplan.diagnostics import has_errors
    from gpuplan.drift import MAX_LIVE_BYTES, Live, LiveInputError, parse_live, read_live, verify

    checked = check_fleet(fleet)
    if checked.failed():
        emit(checked.diagnostics, fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    # one input read and parsed at a time, within one byte and value budget for all of them
    parsed = Live()
    used = 0
    try:
        for name in live:
            shown, raw = read_live(name, MAX_LIVE_BYTES - used)
            used += len(raw)
            parse_live([(shown, raw)], parsed)
            del raw
    except LiveInputError as exc:
        emit(exc.diags, fmt, verbose=verbose)
        ctx.exit(int(ExitCode.INVALID))
    assert checked.resolved is not None
    rf = checked.resolved
    import os

    if os.path.isdir(tree):
        from gpuplan.kept import previous_configs, tree_paths

        # the files it asks for, read here so that one that does not load is said, not skipped
        files = _TreeFiles(tree, tree_paths(tree))
        rf.previous = previous_configs(rf, files=files)
        if files.diagnostics:
            emit(files.diagnostics, fmt, verbose=verbose)
            ctx.exit(int(ExitCode.INVALID))
    result = verify(rf, parsed, planned_quotas(rf), planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES))
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
