"""`gpuplan import`: a draft fleet.yaml from a running cluster's objects.

    read (bounded loader) -> shapes (type check of the fields read) -> infer (objects -> Draft)
        -> emit (commented YAML) -> round trip (compiler + object diff: conventions vs findings)

Pure stages; the CLI (gpuplan.cli.import_cmd) prints and writes. docs/import.md.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from gpuplan.diagnostics import Diagnostic, normalise

__all__ = ["ImportResult", "import_cluster", "import_objects"]


@dataclass
class ImportResult:
    text: str | None  # the draft fleet.yaml (None: nothing to import)
    diagnostics: list[Diagnostic]
    summary: list[str] = field(default_factory=list)  # round-trip lines for people
    sources: dict[str, str] = field(default_factory=dict)  # texts diagnostics may quote
    round_trip: object | None = None  # gpuplan.importer.roundtrip.RoundTrip


def import_objects(objs: list, *, name: str | None = None, display: str = "fleet.yaml",
                   round_trip: bool = True) -> ImportResult:
    from gpuplan.importer.emit import render
    from gpuplan.importer.infer import infer
    from gpuplan.importer.shapes import check

    objs, unread = check(objs)
    draft = infer(objs, name=name)
    draft.diagnostics[:0] = unread
    if not draft.spec:
        return ImportResult(None, normalise(draft.diagnostics))
    text = render(draft)
    diags = list(draft.diagnostics)
    summary: list[str] = []
    rt = None
    if round_trip:
        from gpuplan.importer.roundtrip import round_trip as run

        rt = run(draft, text, display)
        diags += rt.diagnostics
        summary = rt.summary_lines()
    return ImportResult(text, normalise(diags), summary, {display: text}, rt)


def import_cluster(inputs: Sequence[str], *, name: str | None = None, display: str = "fleet.yaml",
                   stdin: bytes | None = None) -> ImportResult:
    """Read ``inputs`` (files, directories, ``-``) and import them."""
    from gpuplan.importer.read import read_inputs

    read = read_inputs(inputs, stdin=stdin)
    if any(d.is_error for d in read.diagnostics):
        return ImportResult(None, normalise(read.diagnostics), sources=read.sources)
    res = import_objects(read.objects, name=name, display=display)
    res.diagnostics = normalise(read.diagnostics + res.diagnostics)
    res.sources = {**read.sources, **res.sources}
    return res
