"""`gpuplan mig`: MIG profiles, creatable layouts, geometry checks, and the planner.

    gpuplan mig profiles MODEL [--json]
    gpuplan mig layouts MODEL|all [--maximal] [--json]
    gpuplan mig check MODEL LAYOUT [--driver R535] [--json]
    gpuplan mig check --mig-parted FILE [--driver R535] [--json]
    gpuplan mig plan ...            (gpuplan.cli.mig_plan, imported only when run)

Exit codes: 0 creatable / ok, 1 not creatable or invalid file, 2 usage.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import importlib
import json
from typing import Any

import click

from gpuplan.exitcodes import ExitCode

# Subcommands that live elsewhere and pull heavy imports (highspy): imported on use.
_LAZY = {"plan": ("gpuplan.cli.mig_plan:plan", "Plan MIG layouts for a demand mix (exact integer programming).")}


class _MigGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _LAZY:
            return super().get_command(ctx, cmd_name)
        target, help_text = _LAZY[cmd_name]
        module, attr = target.split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise

            @click.command(cmd_name, help=help_text, context_settings={"ignore_unknown_options": True})
            @click.argument("args", nargs=-1, type=click.UNPROCESSED)
            @click.pass_context
            def missing(c: click.Context, args: tuple[str, ...]) -> None:
                click.echo(f"gpuplan mig {cmd_name}: not available in this build", err=True)
                c.exit(int(ExitCode.USAGE))

            return missing

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # list lazy subcommands without importing them
        rows = []
        for name in self.list_commands(ctx):
            if name in _LAZY:
                rows.append((name, _LAZY[name][1]))
            else:
                cmd = self.commands[name]
                rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _usage(ctx: click.Context, message: str, hint: str | None = None) -> None:
    click.echo(f"{ctx.command_path}: error: {message}", err=True)
    if hint:
        click.echo(f"  hint: {hint}", err=True)
    ctx.exit(int(ExitCode.USAGE))


def _model(ctx: click.Context, text: str, *, mig_only: bool = False):
    from gpuplan.catalog import resolve_gpu, suggest_gpus

    model = resolve_gpu(text)
    if model is None:
        close = suggest_gpus(text)
        hint = f"did you mean {', '.join(close[:3])}?" if close else "list models with `gpuplan mig layouts all`"
        _usage(ctx, f"unknown GPU model {text!r}", hint)
    if mig_only and not model.mig_capable:
        click.echo(f"{model.key} does not support MIG ({model.architecture}, compute capability "
                   f"{model.compute_capability})", err=True)
        ctx.exit(int(ExitCode.INVALID))
    return model


def _json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


@click.group("mig", cls=_MigGroup, context_settings={"help_option_names": ["-h", "--help"]})
def mig() -> None:
    """MIG profiles, layouts, geometry checks and the MIG planner."""


# --- profiles -----------------------------------------------------------------------------


@mig.command("profiles")
@click.argument("model")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def profiles_cmd(ctx: click.Context, model: str, as_json: bool) -> None:
    """List the MIG profiles of MODEL (GFD/nvidia-smi name, alias or PCI id)."""
    from gpuplan.catalog import mig_resource_name

    g = _model(ctx, model)
    rows = [
        {
            "name": p.name,
            "id": p.smi_id,
            "compute_slices": p.compute_slices,
            "memory_slices": p.memory_slices,
            "max_instances": p.max_instances,
            "placements": p.lgipp,
            "media": p.media,
            "min_driver": f"R{p.min_driver}" if p.min_driver else None,
            "resource_mixed": mig_resource_name(p.name, "mixed"),
            "inferred": list(p.inferred),
        }
        for p in g.profiles
    ]
    if as_json:
        _json({
            "gpu": g.key, "mig_capable": g.mig_capable, "compute_slices": g.compute_slices,
            "memory_slices": g.memory_slices, "max_instances": g.max_instances, "profiles": rows,
        })
        return
    if not g.mig_capable:
        click.echo(f"{g.key}: no MIG profiles ({g.architecture}, compute capability {g.compute_capability} "
                   "does not support MIG)")
        return
    click.echo(f"{g.key}: {g.compute_slices} compute slices, {g.memory_slices} memory slices, "
               f"at most {g.max_instances} GPU instances")
    click.echo(f"{'PROFILE':<16}{'ID':>4}  {'C':>2} {'M':>2} {'MAX':>4}  {'PLACEMENTS':<18}{'DRIVER':<8}NOTES")
    for r in rows:
        notes = ("inferred: " + ", ".join(r["inferred"])) if r["inferred"] else ""
        ident = "?" if r["id"] is None else str(r["id"])
        click.echo(f"{r['name']:<16}{ident:>4}  {r['compute_slices']:>2} {r['memory_slices']:>2} "
                   f"{r['max_instances']:>4}  {r['placements']:<18}{r['min_driver'] or '':<8}{notes}".rstrip())


# --- layouts ------------------------------------------------------------------------------


@mig.command("layouts")
@click.argument("model")
@click.option("--maximal", is_flag=True, help="Only layouts to which no further instance fits.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of profile -> count objects).")
@click.pass_context
def layouts_cmd(ctx: click.Context, model: str, maximal: bool, as_json: bool) -> None:
    """List every creatable MIG layout of one GPU of MODEL (or `all` models)."""
    from gpuplan.catalog import mig_gpus
    from gpuplan.mig.solver import enumerate_layouts, format_layout

    if model.lower() == "all":
        models = list(mig_gpus())
        data = {g.key: list(enumerate_layouts(g, maximal=maximal)) for g in models}
        if as_json:
            _json(data)
            return
        for key, lays in data.items():
            click.echo(f"# {key}: {len(lays)} layouts")
            for lay in lays:
                click.echo(format_layout(lay))
        return
    g = _model(ctx, model, mig_only=True)
    lays = enumerate_layouts(g, maximal=maximal)
    if as_json:
        _json(list(lays))
        return
    for lay in lays:
        click.echo(format_layout(lay))


# --- check --------------------------------------------------------------------------------


def parse_layout_arg(text: str) -> dict[str, int]:
    """``PROFILE[=COUNT][,PROFILE[=COUNT]...]``; repeated profiles add up."""
    from gpuplan.catalog import parse_profile_name

    out: dict[str, int] = {}
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(parts):
        raise ValueError(f"empty item in layout {text!r} (expected PROFILE[=COUNT],...)")
    for part in parts:
        name, sep, count_text = part.partition("=")
        name = name.strip()
        if parse_profile_name(name) is None:
            raise ValueError(f"{name!r} is not a MIG profile name (e.g. 3g.40gb, 1g.10gb+me)")
        count = 1
        if sep:
            count_text = count_text.strip()
            if not count_text.isdigit():
                raise ValueError(f"count of {name} must be a whole number, not {count_text!r}")
            count = int(count_text)
        out[name] = out.get(name, 0) + count
    return out


@mig.command("check")
@click.argument("model", required=False)
@click.argument("layout", required=False)
@click.option("--mig-parted", "mig_parted", type=click.Path(dir_okay=False),
              help="Check every config of a mig-parted config file (or GPU Operator ConfigMap).")
@click.option("--driver", help="NVIDIA driver branch or version (R470, 535.104.05) for driver-specific rules.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def check_cmd(ctx: click.Context, model: str | None, layout: str | None, mig_parted: str | None,
              driver: str | None, as_json: bool) -> None:
    """Check that LAYOUT (PROFILE[=COUNT],...) can be created on one GPU of MODEL.

    Exit 0: creatable (placements and slice diagram printed); 1: not creatable
    (reason and nearest creatable layouts printed); 2: bad arguments.
    """
    from gpuplan.mig.solver import parse_driver

    if driver is not None:
        try:
            parse_driver(driver)
        except ValueError as exc:
            _usage(ctx, str(exc))
    if mig_parted is not None:
        if model or layout:
            _usage(ctx, "give either MODEL LAYOUT or --mig-parted FILE, not both")
        _check_mig_parted(ctx, mig_parted, driver, as_json)
        return
    if not model or not layout:
        _usage(ctx, "expected MODEL and LAYOUT (e.g. `gpuplan mig check A100-SXM4-40GB 3g.20gb,2g.10gb=2`) "
               "or --mig-parted FILE")
    g = _model(ctx, model)
    try:
        wanted = parse_layout_arg(layout)
    except ValueError as exc:
        _usage(ctx, str(exc), "LAYOUT is PROFILE[=COUNT][,PROFILE[=COUNT]...], e.g. 3g.40gb,2g.20gb=2")
    _check_one(ctx, g, wanted, driver, as_json)


def _check_one(ctx: click.Context, g, wanted: dict[str, int], driver: str | None, as_json: bool) -> None:
    from gpuplan.mig.diagram import render_diagram
    from gpuplan.mig.migparted import FAILURE_CODES, hint_for
    from gpuplan.mig.solver import check_layout, describe_layout, format_layout

    result = check_layout(g, wanted, driver=driver)
    if as_json:
        f = result.failure
        _json({
            "gpu": g.key,
            "layout": result.as_dict(),
            "ok": result.ok,
            "placements": [
                {"profile": p.profile, "start": p.start, "size": p.size, "compute_slices": p.compute_slices}
                for p in result.placements
            ],
            "failure": None if f is None else {
                "kind": f.kind.value, "code": FAILURE_CODES[f.kind].code, "message": f.message, "profile": f.profile,
                "instance": f.instance, "taken": [str(t) for t in f.taken], "free_slices": list(f.free_slices),
                "did_you_mean": list(f.did_you_mean), "required_driver": f.required_driver,
            },
            "suggestions": [
                {"layout": s.as_dict(), "removed": dict(s.removed), "added": dict(s.added)} for s in result.suggestions
            ],
            "diagram": render_diagram(g, result.placements).as_dict() if result.ok else None,
        })
        ctx.exit(int(ExitCode.OK if result.ok else ExitCode.INVALID))
    what = describe_layout(result.layout)
    if result.ok:
        click.echo(f"ok: {what} can be created on {g.key}")
        click.echo(render_diagram(g, result.placements).text)
        ctx.exit(int(ExitCode.OK))
    f = result.failure
    assert f is not None
    click.echo(f"error {FAILURE_CODES[f.kind].code}: {f.message}")
    hint = hint_for(result)
    if f.did_you_mean:
        click.echo(f"  hint: did you mean {' or '.join(f.did_you_mean)}?")
    if result.suggestions:
        click.echo("  nearest creatable layouts:")
        for s in result.suggestions:
            click.echo(f"    {format_layout(s.layout):<40} ({s.change})")
    elif hint and not f.did_you_mean:
        click.echo(f"  hint: {hint}")
    ctx.exit(int(ExitCode.INVALID))


def _check_mig_parted(ctx: click.Context, path: str, driver: str | None, as_json: bool) -> None:
    import os

    from gpuplan.mig.migparted import check_mig_parted_file
    from gpuplan.spec.loader import LoadError

    if not os.path.lexists(path):
        _usage(ctx, f"no such file: {path}")
    try:
        report = check_mig_parted_file(path, driver=driver)
    except LoadError as exc:
        _usage(ctx, f"cannot read {path}: {exc.diag.message}")
    if as_json:
        _json({
            "file": report.file,
            "ok": report.ok,
            "configs": report.configs,
            "entries": report.entries,
            "diagnostics": [
                {"code": d.code, "severity": d.severity.value, "message": d.message, "file": d.file,
                 "line": d.line, "col": d.col, "path": d.path, "hint": d.hint}
                for d in report.diagnostics
            ],
        })
    else:
        for d in report.diagnostics:
            click.echo(f"{d.location()}: {d.severity.value} {d.code}: {d.message}")
            if d.hint:
                click.echo(f"  hint: {d.hint}")
        errors = sum(1 for d in report.diagnostics if d.is_error)
        warnings = len(report.diagnostics) - errors
        status = "ok" if report.ok else "invalid"
        click.echo(f"{path}: {status}: {report.configs} configs, {report.entries} entries, "
                   f"{errors} errors, {warnings} warnings")
    ctx.exit(int(ExitCode.OK if report.ok else ExitCode.INVALID))
