"""`gpuplan probe`: this node's GPUs through NVML -> one NodeInventory document.

Exit codes (docs/probe.md):
  0  inventory written (also with 0 GPUs, and with per-field NVML errors,
     which are recorded in the document and listed on stderr)
  1  the output file could not be written; --publish --once failed
  2  bad command line
  5  no NVML: nvidia-ml-py missing, libnvidia-ml.so.1 missing, driver not
     loaded, NVML refused to start or to count the GPUs

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from gpuplan.exitcodes import ExitCode

FAKE_ENV = "GPUPLAN_NVML_FAKE"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("gpuplan")
    except Exception:  # noqa: BLE001 - metadata missing in odd installs is not fatal
        return "0.0.0"


def _fail(ctx: click.Context, code: ExitCode, message: str) -> None:
    click.echo(f"gpuplan probe: {message}", err=True)
    ctx.exit(int(code))


def _load_nvml(fake: str | None):
    """(nvml module, source, fixture node defaults)."""
    from gpuplan.probe.collect import NvmlUnavailable

    if fake:
        from gpuplan.probe.fake import FixtureError, load_fake

        try:
            fk = load_fake(fake)
        except FixtureError as exc:
            raise click.BadParameter(str(exc), param_hint="--fake") from None
        return fk, "fake", fk.node
    try:
        import pynvml  # the `probe` extra (nvidia-ml-py)
    except ImportError:
        raise NvmlUnavailable(
            "the NVML Python bindings are not installed (pip install 'gpuplan[probe]')"
        ) from None
    return pynvml, "nvml", {}


def _produce(fake: str | None, node_name: str | None, fmt: str):
    """Probe once: (inventory, document text)."""
    from gpuplan.probe.collect import probe_node, read_online_cpus
    from gpuplan.probe.inventory import dump

    nvml, source, defaults = _load_nvml(fake)
    hostname = defaults.get("hostname") or socket.gethostname()
    name = node_name or os.environ.get("NODE_NAME") or defaults.get("name") or hostname
    cpus = str(defaults["onlineCpus"]) if "onlineCpus" in defaults else (None if fake else read_online_cpus())
    inv = probe_node(nvml, node_name=name, hostname=hostname, version=_version(), source=source,
                     online_cpus=cpus)
    return inv, dump(inv, fmt)


def _report(inv) -> None:
    if not inv.gpus:
        click.echo(f"gpuplan probe: NVML sees no GPU on {inv.metadata.name}; the inventory lists 0 GPUs", err=True)
    for e in inv.system.errors:
        click.echo(f"gpuplan probe: {e.field} not read ({e.nvml_error})", err=True)
    for g in inv.gpus:
        for e in g.errors:
            click.echo(f"gpuplan probe: GPU {g.index}: {e.field} not read ({e.nvml_error})", err=True)
    for e in inv.topology.errors:
        click.echo(f"gpuplan probe: topology: {e.field} not read ({e.nvml_error})", err=True)


@click.command("probe")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write the inventory here (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default=None,
              help="Output format (default: json for *.json, else yaml).")
@click.option("--node-name", default=None, help="metadata.name (default: $NODE_NAME, else the hostname).")
@click.option("--publish", type=click.Choice(["configmap"]), default=None,
              help="Run as the node-probe: publish to a ConfigMap in a loop, writing only on change.")
@click.option("--namespace", default="gpuplan-system", show_default=True, help="Namespace for --publish.")
@click.option("--interval", default="6h", show_default=True, help="Time between probes with --publish.")
@click.option("--jitter", default="10m", show_default=True, help="Random spread of start and interval.")
@click.option("--once", is_flag=True, help="With --publish: publish once and exit.")
@click.option("--fake", type=click.Path(exists=True, dir_okay=False), default=None, hidden=True,
              envvar=FAKE_ENV, help="Read a fake NVML fixture instead of the hardware (tests, docs).")
@click.pass_context
def probe(ctx: click.Context, output: str, fmt: str | None, node_name: str | None, publish: str | None,
          namespace: str, interval: str, jitter: str, once: bool, fake: str | None) -> None:
    """Read this node's GPUs through NVML into a NodeInventory document.

    Read-only: only NVML queries are made, nothing on the GPU changes.
    """
    from gpuplan.probe.collect import NvmlUnavailable

    if fmt is None:
        fmt = "json" if output.endswith(".json") else "yaml"

    if publish:
        _publish(ctx, fake, node_name, namespace, interval, jitter, once)
        return

    try:
        inv, text = _produce(fake, node_name, fmt)
    except NvmlUnavailable as exc:
        _fail(ctx, ExitCode.NO_DEVICE, exc.reason)
        return
    _report(inv)
    if output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from gpuplan.output.atomic import write_atomic

        path = Path(output)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text.encode("utf-8"))
        except OSError as exc:
            _fail(ctx, ExitCode.INVALID, f"cannot write {path}: {exc.strerror or exc}")
            return
    ctx.exit(int(ExitCode.OK))


def _publish(ctx: click.Context, fake: str | None, node_name: str | None, namespace: str,
             interval: str, jitter: str, once: bool) -> None:
    from gpuplan.probe.collect import NvmlUnavailable
    from gpuplan.probe.publish import InClusterApi, LoopOptions, PublishError, parse_duration, publish_once, run_loop

    try:
        opts = LoopOptions(interval=parse_duration(interval), jitter=parse_duration(jitter), namespace=namespace)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    try:
        api = InClusterApi()
    except PublishError as exc:
        _fail(ctx, ExitCode.INVALID, str(exc))
        return

    def produce() -> tuple[str, str]:
        inv, text = _produce(fake, node_name, "yaml")
        _report(inv)
        return inv.metadata.name, text

    try:
        if once:
            node, text = produce()
            result = publish_once(api, node, text, namespace=namespace)
            click.echo(f"gpuplan probe: {namespace}/inventory-{node} {result}", err=True)
        else:
            run_loop(produce, api, opts, log=lambda m: click.echo(m, err=True))
    except NvmlUnavailable as exc:
        # exit, so the pod restarts with backoff and the reason is in its status
        _fail(ctx, ExitCode.NO_DEVICE, exc.reason)
        return
    except PublishError as exc:
        _fail(ctx, ExitCode.INVALID, f"publish failed: {exc}")
        return
    ctx.exit(int(ExitCode.OK))
