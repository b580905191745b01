"""Refresh the pinned Prometheus Operator CRD schemas (ServiceMonitor, PrometheusRule).

    python -m gpuplan.upstream.refresh_monitoring GIT_DIR_OR_CRD_DIR

The argument is a prometheus-operator git checkout (bare or not; the files are
read at :data:`TAG`) or a folder holding the two CRD YAML files. Each CRD's
``spec.versions[v1].schema.openAPIV3Schema`` becomes a strict JSON Schema, in
the form of the project's other pinned CRD schemas:

- ``additionalProperties: false`` on every object with ``properties``, except
  under ``x-kubernetes-preserve-unknown-fields: true`` (the API server prunes
  unknown fields there, so kubeconform-style "strict" means the same thing);
- ``x-kubernetes-int-or-string`` becomes ``anyOf: [integer, string]``;
- ``apiVersion`` and ``kind`` get an ``enum`` and are required;
- a Go regular expression with a flag group after ``^`` is rewritten so Python
  ``re`` (jsonschema) accepts it.

Output: ``gpuplan/upstream/crds/monitoring.coreos.com/<kind>_v1.json`` and the
table in ``SOURCES-monitoring.md``. ``merge_into(sources)`` returns the rows
for a combined sources list.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPOSITORY = "prometheus-operator/prometheus-operator"
TAG = "v0.93.0"
GROUP = "monitoring.coreos.com"
CRDS = {
    "ServiceMonitor": "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
    "PrometheusRule": "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
}
HERE = Path(__file__).resolve().parent
OUT = HERE / "crds" / GROUP
SOURCES = HERE / "SOURCES-monitoring.md"


def python_pattern(pattern: str) -> str:
    """A Go (RE2) pattern as Python ``re`` reads it: Go allows a flag group such as
    ``^(?i)...`` after the anchor, Python only at the very start (same meaning here)."""
    if pattern.startswith("^(?i)"):
        return "(?i)^" + pattern[len("^(?i)"):]
    return pattern


def strict(node: Any, *, open_: bool = False) -> Any:
    """The strict JSON Schema of one openAPIV3Schema node."""
    if isinstance(node, list):
        return [strict(n, open_=open_) for n in node]
    if not isinstance(node, dict):
        return node
    open_ = open_ or node.get("x-kubernetes-preserve-unknown-fields") is True
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: strict(v, open_=open_) for k, v in value.items()}
        elif key == "enum" or key == "default" or key == "example":
            out[key] = value
        elif key == "pattern" and isinstance(value, str):
            out[key] = python_pattern(value)
        else:
            out[key] = strict(value, open_=open_)
    if node.get("x-kubernetes-int-or-string") is True and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in out and not open_ and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def crd_schema(crd: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    [ver] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = strict(ver["schema"]["openAPIV3Schema"])
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    props = schema["properties"]
    props["apiVersion"] = {**props.get("apiVersion", {"type": "string"}), "enum": [f"{group}/{version}"]}
    props["kind"] = {**props.get("kind", {"type": "string"}), "enum": [kind]}
    required = list(schema.get("required", []))
    schema["required"] = required + [k for k in ("apiVersion", "kind") if k not in required]
    return schema


def _read(source: Path, path: str) -> tuple[str, str | None]:
    """(text, commit) of ``path`` in a git dir at TAG, or in a plain folder."""
    if (source / path).is_file():
        return (source / path).read_text(encoding="utf-8"), None
    plain = source / Path(path).name
    if plain.is_file():
        return plain.read_text(encoding="utf-8"), None
    git = ["git", f"--git-dir={source if (source / 'HEAD').is_file() else source / '.git'}"]
    text = subprocess.run([*git, "show", f"{TAG}:{path}"], check=True, capture_output=True, text=True).stdout
    commit = subprocess.run([*git, "rev-list", "-n1", TAG], check=True, capture_output=True, text=True).stdout.strip()
    return text, commit


def refresh(source: Path) -> list[dict[str, str]]:
    import yaml

    rows = []
    OUT.mkdir(parents=True, exist_ok=True)
    for kind, path in CRDS.items():
        text, commit = _read(source, path)
        [crd] = [d for d in yaml.safe_load_all(text) if d]
        out = OUT / f"{kind.lower()}_v1.json"
        out.write_text(json.dumps(crd_schema(crd), indent=1, sort_keys=False) + "\n", encoding="utf-8")
        rows.append({"file": f"crds/{GROUP}/{out.name}", "apiVersion": f"{GROUP}/v1", "kind": kind,
                     "repository": REPOSITORY, "tag": TAG, "commit": commit or "(folder)", "path": path})
    return rows


def merge_into(sources: list[dict[str, str]], rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Sources with this module's rows replacing any older rows for the same files."""
    files = {r["file"] for r in rows}
    return [s for s in sources if s.get("file") not in files] + rows


def write_table(path: Path, intro: list[str], rows: list[dict[str, str]]) -> None:
    """A SOURCES-*.md: :func:`table_text` written to ``path``."""
    path.write_text(table_text(intro, rows), encoding="utf-8")


def table_text(intro: list[str], rows: list[dict[str, str]]) -> str:
    """The text of a SOURCES-*.md: the intro lines, then one row per pinned schema (the row format
    ``gpuplan.upstream.refresh`` reads back); ``-`` where a version is not deprecated."""
    lines = [
        *intro,
        "",
        "| file | apiVersion / kind | repository | tag | commit | path | deprecation warning |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        warning = r.get("deprecation") or "-"
        if "|" in warning:
            raise SystemExit(f"{r['file']}: a deprecation warning with '|' does not fit the table: {warning!r}")
        lines.append(f"| {r['file']} | {r['apiVersion']} {r['kind']} | {r['repository']} | {r['tag']} | "
                     f"{r['commit']} | {r['path']} | {warning} |")
    return "\n".join(lines) + "\n"


def write_sources(rows: list[dict[str, str]]) -> None:
    write_table(SOURCES, [
        "# Prometheus Operator CRD schemas",
        "",
        "Strict JSON Schemas derived from each CRD's `openAPIV3Schema` by",
        "`python -m gpuplan.upstream.refresh_monitoring <prometheus-operator git dir>`",
        "(additionalProperties false on every object with properties, except under",
        "`x-kubernetes-preserve-unknown-fields`; int-or-string as anyOf integer/string;",
        "apiVersion and kind pinned). The tests validate generated objects against them.",
    ], rows)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    write_sources(refresh(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
