"""`gpuplan schema [--inventory]`.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json

import click


def fleet_schema() -> dict:
    from gpuplan.spec.models import Fleet

    schema = Fleet.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gpuplan.dev/schemas/fleet.schema.json"
    schema["title"] = "gpuplan Fleet (gpuplan.dev/v1alpha1)"
    return schema


def dumps(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


@click.command()
@click.option("--inventory", is_flag=True, help="Print the schema of node-probe inventory files.")
@click.option("--markdown", is_flag=True,
              help="Print the spec reference page instead (docs/spec.md is this output).")
@click.pass_context
def schema(ctx: click.Context, inventory: bool, markdown: bool) -> None:
    """Print the JSON Schema of fleet.yaml (schemas/fleet.schema.json is this output)."""
    if markdown:
        if inventory:
            raise click.UsageError("--markdown documents the fleet spec; it does not combine with --inventory")
        from gpuplan.spec.reference import render_markdown

        click.echo(render_markdown(fleet_schema()), nl=False)
    elif inventory:
        from gpuplan.probe.inventory import inventory_json_schema

        click.echo(dumps(inventory_json_schema()), nl=False)
    else:
        click.echo(dumps(fleet_schema()), nl=False)
