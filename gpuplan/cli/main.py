"""`gpuplan` entry point.

Subcommands are imported only when they run, so `gpuplan validate` never pays
for jinja2, jsonschema, highspy or NVML.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import importlib
import sys

import click

from gpuplan.exitcodes import ExitCode

# name -> "module:attribute" of a click command
COMMANDS: dict[str, str] = {
    "validate": "gpuplan.cli.validate:validate",
    "schema": "gpuplan.cli.schema:schema",
    "build": "gpuplan.cli.build:build",
    "check": "gpuplan.cli.build:check",
    "diff": "gpuplan.cli.build:diff",
    "plan": "gpuplan.cli.plan:plan",
    "mig": "gpuplan.cli.mig:mig",
    "probe": "gpuplan.cli.probe:probe",
    "inventory": "gpuplan.cli.inventory:inventory",
    "explain": "gpuplan.cli.explain:explain",
    "verify-cluster": "gpuplan.cli.verify_cluster:verify_cluster",
    "verify": "gpuplan.cli.verify:verify",
    "import": "gpuplan.cli.import_cmd:import_cmd",
    "nodes": "gpuplan.cli.nodes:nodes",
    "review": "gpuplan.cli.review:review",
}

HELP = {
    "validate": "Validate a fleet spec and report every problem.",
    "schema": "Print the JSON Schema of fleet.yaml (or of inventory files).",
    "build": "Compile a fleet spec into the generated/ tree.",
    "check": "Fail (exit 3) when generated/ is stale.",
    "diff": "Show object-level changes the spec makes to generated/.",
    "plan": "Capacity, oversubscription and cost report.",
    "mig": "MIG profiles, layouts, geometry checks and the MIG planner.",
    "probe": "Read this node's GPUs through NVML into an inventory document.",
    "inventory": "Collect node-probe inventories into the repository.",
    "explain": "Explain a diagnostic code.",
    "verify-cluster": "Compare live nodes and quotas (kubectl get -o json) with the plan.",
    "verify": "Verify manifests against the pinned upstream schemas and CEL rules.",
    "import": "Write a draft fleet.yaml from a running cluster's exported objects.",
    "nodes": "Write the Node objects of every pool (for KWOK, simulators).",
    "review": "What a change since a git ref does: disruptions first, then objects, then capacity.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        if ctx.resilient_parsing or "--help" in sys.argv[1:2]:
            # `gpuplan --help` lists commands without importing them
            return click.Command(cmd_name, help=HELP.get(cmd_name, ""))
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpuplan", prog_name="gpuplan")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """gpuplan: compile a Kubernetes GPU fleet spec into GitOps manifests."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="gpuplan", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        code = 130
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    except Exception as exc:  # noqa: BLE001 - last-resort guard: exit 4, never a raw traceback
        if debug:
            import traceback

            traceback.print_exc()
        else:
            click.echo(
                f"gpuplan: internal error ({type(exc).__name__}: {exc}); "
                "re-run with --debug for the traceback and please report it",
                err=True,
            )
        code = ExitCode.INTERNAL
    sys.exit(int(code or 0))


if __name__ == "__main__":  # pragma: no cover
    main()
