"""`gpuplan mig plan MODEL --demand PROFILE=COUNT[,...]`: the fewest GPUs for a MIG demand.

Mounted under the `mig` group. The planner (and highspy, when it is needed) is
imported only when the command runs.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from gpuplan.exitcodes import ExitCode

if TYPE_CHECKING:  # the planner is imported only when the command runs
    from gpuplan.mig.planner import Plan


def parse_demand(values: tuple[str, ...] | list[str]) -> dict[str, int]:
    """``("3g.40gb=2,1g.10gb=4", "2g.20gb=1")`` -> ``{"3g.40gb": 2, "1g.10gb": 4, "2g.20gb": 1}``.

    Repeated profiles add up. Raises ``click.BadParameter`` (exit 2) on bad syntax."""
    out: dict[str, int] = {}
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, count = item.partition("=")
            name, count = name.strip(), count.strip()
            if not sep or not name or not count:
                raise click.BadParameter(f"{item!r}: expected PROFILE=COUNT, e.g. 3g.40gb=4", param_hint="'--demand'")
            if not count.isdigit():
                raise click.BadParameter(f"{item!r}: COUNT must be a whole number >= 0", param_hint="'--demand'")
            out[name] = out.get(name, 0) + int(count)
    if not out:
        raise click.BadParameter("no demand given, e.g. --demand 3g.40gb=4,1g.10gb=8", param_hint="'--demand'")
    return out


def _pct(saving: int, naive: int) -> str:
    return f" ({100 * saving / naive:.1f}% fewer)" if naive and saving > 0 else ""


def render_text(p: Plan) -> str:
    from gpuplan.mig.planner import format_layout

    asked = ", ".join(f"{n}×{c}" for n, c in p.demand.items())
    total = sum(p.demand.values())
    lines = [f"{p.gpu}: {p.gpus} GPU{'s' if p.gpus != 1 else ''} for {total} MIG instances ({asked})"]
    width = max((len(str(n)) for _, n in p.layouts), default=1)
    for layout, n in p.layouts:
        lines.append(f"  {n:>{width}} GPU{'s' if n != 1 else ' '} × {format_layout(layout)}")
    status = "optimal" if p.optimal else f"gap {p.gap} GPU{'s' if p.gap != 1 else ''}"
    why = f" ({p.binding_bound})" if p.binding_bound else ""
    lines.append(f"lower bound: {p.lower_bound} GPUs{why}; {status}")
    lines.append(
        f"naive plan (one profile per GPU, all-<profile>): {p.naive_gpus} GPUs; "
        f"saving {p.saving} GPU{'s' if p.saving != 1 else ''}{_pct(p.saving, p.naive_gpus)}"
    )
    lines.append(
        f"idle: {p.idle_compute_slices} compute slices, {p.idle_memory_slices} memory slices"
    )
    return "\n".join(lines)


@click.command("plan")
@click.argument("model")
@click.option(
    "--demand", "demand", multiple=True, required=True, metavar="PROFILE=COUNT[,...]",
    help="MIG instances needed, e.g. 3g.40gb=4,1g.10gb=8 (repeatable; repeats add up).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--objective", type=click.Choice(["gpus"]), default="gpus", show_default=True,
    help="What to minimise (mixed fleets also offer cost: `gpuplan plan FLEET --optimise`).",
)
@click.option(
    "--time-limit", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
    metavar="SECONDS", help="Time limit for the integer program; the answer says if it was not proved optimal.",
)
@click.pass_context
def plan(ctx: click.Context, model: str, demand: tuple[str, ...], as_json: bool, objective: str, time_limit: float) -> None:
    """Plan MIG layouts for MODEL: the fewest GPUs that provide the demand.

    Prints the layouts grouped, a proved lower bound and the gap, and the naive
    one-profile-per-GPU plan for comparison. Exit 0 with a plan, 1 when the demand
    cannot be met on MODEL (unknown model or profile), 2 on bad syntax."""
    wanted = parse_demand(demand)
    from gpuplan.mig.planner import PlanError
    from gpuplan.mig.planner import plan as make_plan

    try:
        result = make_plan(model, wanted, time_limit=time_limit)
    except PlanError as exc:
        click.echo(f"error: {exc.message}", err=True)
        if as_json:
            click.echo(json.dumps({"error": exc.message, "suggestions": list(exc.suggestions)}, indent=2))
        ctx.exit(int(ExitCode.INVALID))
        return
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(render_text(result))
    ctx.exit(int(ExitCode.OK))
