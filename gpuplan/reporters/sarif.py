"""SARIF 2.1.0, for code-scanning uploads.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Sequence

from gpuplan import __version__
from gpuplan.diagnostics import Diagnostic
from gpuplan.diagnostics import escape

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def render(diags: Sequence[Diagnostic]) -> str:
    from gpuplan.codes import all_codes

    known = all_codes()
    used = sorted({d.code for d in diags})
    rules = []
    for code in used:
        c = known.get(code)
        rule: dict = {"id": code}
        if c is not None:
            rule["name"] = c.title
            rule["shortDescription"] = {"text": c.title}
            rule["fullDescription"] = {"text": c.summary}
            rule["helpUri"] = f"docs/codes.md#{code.lower()}"
        rules.append(rule)
    index = {code: i for i, code in enumerate(used)}
    results = []
    for d in diags:
        r: dict = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _LEVEL[d.severity.value],
            "message": {"text": escape(d.message) + (f" (hint: {escape(d.hint)})" if d.hint else "")},
        }
        if d.file:
            region = {}
            if d.line is not None:
                region["startLine"] = d.line
                if d.col is not None:
                    region["startColumn"] = d.col
            loc: dict = {"physicalLocation": {"artifactLocation": {"uri": escape(d.file)}}}
            if region:
                loc["physicalLocation"]["region"] = region
            if d.path:
                loc["logicalLocations"] = [{"fullyQualifiedName": escape(d.path)}]
            r["locations"] = [loc]
        results.append(r)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gpuplan", "version": __version__,
                "informationUri": "https://github.com/gpuplan/gpuplan", "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"
