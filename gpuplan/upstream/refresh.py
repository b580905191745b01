"""Refresh the pinned upstream material shipped inside gpuplan.

    python -m gpuplan.upstream.refresh [--reference DIR] [--check]

Reads a reference directory (default ``../shared/reference`` beside the
repository) laid out as::

    k8s/schemas/catalog-strict/<group>/<kind>_<version>.json   strict CRD schemas
    k8s/schemas/cel/<kind>-<short>-<version>.cel.json          their CEL rules
    k8s/schemas/SOURCES.md                                     repository, tag, commit, path of each
    k8s/aws-gpu-instance-types.json                            Karpenter's instance-type data
    mig/mig-profiles.yaml                                      MIG geometry (input of catalog/gpus.json)

and writes, for the kinds in ``TARGETS`` only (what gpuplan emits or reads):

    gpuplan/upstream/crds/<group>/<kind>_<version>.json   descriptions removed, keys sorted, one line
    gpuplan/upstream/cel/<file>.cel.json                  copied as they are
    gpuplan/upstream/sources.json, SOURCES.md             where every file came from
    gpuplan/cloud/data/aws-gpu-instance-types.json        copied as it is
    gpuplan/catalog/gpus.json                             rebuilt by gpuplan.catalog.build_catalog

The Prometheus Operator schemas (``crds/monitoring.coreos.com``, from a
prometheus-operator checkout through ``python -m gpuplan.upstream.refresh_monitoring``)
Kueue's (``crds/kueue.x-k8s.io``, ``python -m gpuplan.upstream.refresh_kueue``)
the GPU Operator's NVIDIADriver (``python -m gpuplan.upstream.refresh_nvidia``)
and Volcano's Queue, PodGroup and Job (``python -m gpuplan.upstream.refresh_volcano``)
are left as they are; this script lists them, with their CEL rules and the sources
in ``SOURCES-monitoring.md`` / ``SOURCES-kueue.md`` / ``SOURCES-nvidia.md`` /
``SOURCES-volcano.md`` (and the other ``SOURCES-*.md`` of :data:`_OWN_TABLES`), in
``sources.json`` and ``SOURCES.md``.

``--check`` writes nothing and exits 1 when any shipped file differs from what
the reference would produce. Only this script (never the program or its tests)
opens the reference directory.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parent

# (group, kind, version): the upstream APIs gpuplan emits or reads, refreshed
# here. The NVIDIA ClusterPolicy is rendered by the GPU Operator chart from
# gpuplan's values. Kueue (refresh_kueue) and the Prometheus Operator
# (refresh_monitoring) have refresh scripts of their own.
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("karpenter.sh", "NodePool", "v1"),
    ("karpenter.sh", "NodeOverlay", "v1alpha1"),
    ("karpenter.k8s.aws", "EC2NodeClass", "v1"),
    ("nvidia.com", "ClusterPolicy", "v1"),
    ("nfd.k8s-sigs.io", "NodeFeatureRule", "v1alpha1"),
    ("argoproj.io", "Application", "v1alpha1"),
    ("argoproj.io", "AppProject", "v1alpha1"),
    ("kustomize.toolkit.fluxcd.io", "Kustomization", "v1"),
    ("helm.toolkit.fluxcd.io", "HelmRelease", "v2"),
    ("source.toolkit.fluxcd.io", "HelmRepository", "v1"),
)

HARDWARE = {
    # shipped file (relative to the repository) -> reference file
    "gpuplan/cloud/data/aws-gpu-instance-types.json": "k8s/aws-gpu-instance-types.json",
}
AWS_SOURCE = {
    "repository": "aws/karpenter-provider-aws",
    "tag": "v1.14.0",
    "commit": "692ccdd0",
    "path": "website/content/en/v1.14/reference/instance-types.md",
    "note": "generated upstream by hack/docs/instancetypes_gen from DescribeInstanceTypes; p2/p3/g3 from "
            "website/content/en/v1.0/reference/instance-types.md @5e6f8963",
}


def default_reference() -> Path:
    return REPO.parent / "shared" / "reference"


def strip_descriptions(node: Any, in_properties: bool = False) -> Any:
    """The schema without ``description`` keywords (a property *named*
    description, under ``properties``, is kept)."""
    if isinstance(node, dict):
        return {k: strip_descriptions(v, k in ("properties", "patternProperties") and not in_properties)
                for k, v in node.items() if in_properties or k != "description"}
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def dump_compact(data: Any) -> str:
    """Schemas are large and change only on refresh: one line, sorted keys."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"


_ROW = re.compile(r"^\| (?P<file>[^|]+?) \| (?P<api>[^|]+?) \| (?P<served>[^|]+?) \| (?P<storage>[^|]+?) \| "
                  r"(?P<deprecated>[^|]+?) \| (?P<cel>[^|]+?) \| (?P<repo>[^|]+?) \| (?P<ref>[^|]+?) \| "
                  r"(?P<commit>[^|]+?) \| (?P<path>[^|]+?) \|$")


def parse_sources(text: str) -> dict[str, dict[str, str]]:
    """``SOURCES.md`` rows by apiVersion/kind (``karpenter.sh/v1 NodePool``)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = _ROW.match(line.strip())
        if not m or m["file"] in ("file", "---"):
            continue
        commit, _, date = m["commit"].partition(" ")
        out.setdefault(m["api"], {
            "reference_file": m["file"], "served": m["served"], "storage": m["storage"],
            "deprecated": m["deprecated"], "repository": m["repo"], "tag": m["ref"],
            "commit": commit, "date": date.strip("()"), "path": m["path"],
        })
    return out


def cel_file(ref_file: str) -> str:
    return ref_file[: -len(".json")] + ".cel.json"


def plan(reference: Path) -> dict[Path, str]:
    """Every file this refresh writes, with its content."""
    schemas = reference / "k8s" / "schemas"
    rows = parse_sources((schemas / "SOURCES.md").read_text(encoding="utf-8"))
    files: dict[Path, str] = {}
    entries = []
    for group, kind, version in TARGETS:
        row = rows.get(f"{group}/{version} {kind}")
        if row is None:
            raise SystemExit(f"{group}/{version} {kind}: not in {schemas / 'SOURCES.md'}")
        src = schemas / "catalog-strict" / group / f"{kind.lower()}_{version}.json"
        schema = json.loads(src.read_text(encoding="utf-8"))
        crd = f"crds/{group}/{kind.lower()}_{version}.json"
        files[HERE / crd] = dump_compact(strip_descriptions(schema))
        cel = cel_file(row["reference_file"])
        rules = json.loads((schemas / "cel" / cel).read_text(encoding="utf-8"))
        files[HERE / "cel" / cel] = dump(rules)
        entries.append({
            "apiVersion": f"{group}/{version}", "kind": kind,
            "schema": crd, "cel": f"cel/{cel}", "celRules": len(rules),
            "repository": row["repository"], "tag": row["tag"], "commit": row["commit"],
            "date": row["date"], "path": row["path"],
            "transform": "spec.versions[].schema.openAPIV3Schema of the CRD; additionalProperties: false on every "
                         "object with properties outside x-kubernetes-preserve-unknown-fields; descriptions removed",
        })
    entries += monitoring_entries(files)
    entries += kueue_entries()
    hardware = []
    for shipped, ref in HARDWARE.items():
        raw = (reference / ref).read_text(encoding="utf-8")
        files[REPO / shipped] = raw
        hardware.append({"file": shipped, "sha256": hashlib.sha256(raw.encode()).hexdigest(), **AWS_SOURCE})
    from gpuplan.catalog import build_catalog

    catalog = build_catalog.build(reference / "mig" / "mig-profiles.yaml")
    files[REPO / "gpuplan/catalog/gpus.json"] = build_catalog.render(catalog)
    hardware.append({
        "file": "gpuplan/catalog/gpus.json", "sha256_of_input": catalog["reference"]["sha256"],
        "built_by": "gpuplan/catalog/build_catalog.py",
        "note": "MIG geometry compiled from NVIDIA documents and source; every upstream document, repository and "
                "commit is listed under `sources` inside gpus.json",
    })
    raw = (REPO / "gpuplan/catalog/drivers.json").read_text(encoding="utf-8")
    drivers = json.loads(raw)["source"]
    hardware.append({
        "file": "gpuplan/catalog/drivers.json", "built_by": "gpuplan/catalog/build_drivers.py",
        "sha256": hashlib.sha256(raw.encode()).hexdigest(),
        "note": f"first driver release per GPU model and branch, from the {drivers['path']} of every tagged "
                f"release of {drivers['repository']} ({drivers['oldest_tag']} to {drivers['newest_tag']}, "
                f"{drivers['newest_commit']}); rebuilt from a clone, not from the reference directory",
    })
    files[HERE / "sources.json"] = dump({"crds": entries, "hardware": hardware})
    files[HERE / "SOURCES.md"] = render_markdown(entries, hardware)
    return files


_MON_ROW = re.compile(r"^\| (?P<file>crds/[^|]+?) \| (?P<api>[^ |]+) (?P<kind>[^|]+?) \| (?P<repo>[^|]+?) \| "
                      r"(?P<tag>[^|]+?) \| (?P<commit>[^|]+?) \| (?P<path>[^|]+?) \|"
                      r"(?: (?P<deprecation>[^|]+?) \|)?$")


def deprecation(warning: str | None) -> dict[str, Any]:
    """The ``sources.json`` keys of a version from the deprecation cell of its SOURCES-*.md row
    (``-``: not deprecated; else the warning the API server sends, crdread.served_versions)."""
    if warning is None or warning.strip() == "-":
        return {}
    return {"deprecated": True, "deprecationWarning": warning.strip()}


# schemas pinned by refresh scripts of their own, each with a table in this row format
_OWN_TABLES = (("SOURCES-monitoring.md", "refresh_monitoring"), ("SOURCES-nvidia.md", "refresh_nvidia"),
               ("SOURCES-capi.md", "refresh_capi"), ("SOURCES-aks.md", "refresh_aks"),
               ("SOURCES-gke.md", "refresh_gke"), ("SOURCES-volcano.md", "refresh_volcano"))


def monitoring_entries(files: dict[Path, str]) -> list[dict]:
    """Entries for the schemas ``refresh_monitoring`` (SOURCES-monitoring.md) and
    ``refresh_nvidia`` (SOURCES-nvidia.md) pin, with a ``cel/`` list of their rules read
    from the schema itself."""
    out = []
    for table, script in _OWN_TABLES:
        out += _own_entries(files, HERE / table, script)
    return out


def _own_entries(files: dict[Path, str], src: Path, script: str) -> list[dict]:
    if not src.is_file():
        return []
    out = []
    for line in src.read_text(encoding="utf-8").splitlines():
        m = _MON_ROW.match(line.strip())
        if not m:
            continue
        schema = json.loads((HERE / m["file"]).read_text(encoding="utf-8"))
        cel = own_cel_file(m["api"], m["kind"])
        rules = inline_rules(schema)
        files[HERE / cel] = dump(rules)
        out.append({
            "apiVersion": m["api"], "kind": m["kind"], "schema": m["file"], "cel": cel, "celRules": len(rules),
            "repository": m["repo"], "tag": m["tag"], "commit": m["commit"], "date": "", "path": m["path"],
            "transform": f"refreshed by python -m gpuplan.upstream.{script} ({src.name})",
            **deprecation(m["deprecation"]),
        })
    return out


def own_cel_file(api_version: str, kind: str) -> str:
    """The ``cel/`` file of a schema listed in one of :data:`_OWN_TABLES` (``scheduling.volcano.sh/v1beta1``
    ``Queue`` -> ``cel/queue-scheduling-v1beta1.cel.json``)."""
    group, _, version = api_version.rpartition("/")
    return f"cel/{kind.lower()}-{group.split('.')[0]}-{version}.cel.json"


_KUEUE_ROW = re.compile(r"^\| (?P<file>crds/kueue[^|]+?) \| (?P<how>[^|]+?) \| (?P<path>[^|]+?) \|"
                        r"(?: (?P<deprecation>[^|]+?) \|)?$")


def kueue_entries() -> list[dict]:
    """Entries for the schemas ``refresh_kueue`` pins (its SOURCES-kueue.md)."""
    src = HERE / "SOURCES-kueue.md"
    if not src.is_file():
        return []
    from gpuplan.upstream import refresh_kueue

    text = src.read_text(encoding="utf-8")
    commit = re.search(r"\(([0-9a-f]{40})\)", text)
    out = []
    for line in text.splitlines():
        m = _KUEUE_ROW.match(line.strip())
        if not m:
            continue
        schema = json.loads((HERE / m["file"]).read_text(encoding="utf-8"))
        kind = schema["properties"]["kind"]["enum"][0]
        version = m["file"].rsplit("_", 1)[1][: -len(".json")]
        cel = f"cel/{kind.lower()}-kueue-{version}.cel.json"
        out.append({
            "apiVersion": f"{refresh_kueue.GROUP}/{version}", "kind": kind, "schema": m["file"], "cel": cel,
            "celRules": len(json.loads((HERE / cel).read_text(encoding="utf-8"))),
            "repository": refresh_kueue.REPOSITORY, "tag": refresh_kueue.TAG,
            "commit": commit[1] if commit else "", "date": "", "path": m["path"],
            "transform": f"refreshed by python -m gpuplan.upstream.refresh_kueue ({m['how']}; SOURCES-kueue.md)",
            **deprecation(m["deprecation"]),
        })
    return out


def inline_rules(schema: dict, path: str = "$") -> list[dict]:
    """The ``x-kubernetes-validations`` of a schema, as ``cel/*.cel.json`` lists them."""
    out = [{"message": r.get("message", ""), "path": path, "rule": r["rule"]}
           for r in schema.get("x-kubernetes-validations", [])]
    for k, v in schema.get("properties", {}).items():
        out += inline_rules(v, f"{path}.{k}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out += inline_rules(schema[key], f"{path}[*]")
    return out


def render_markdown(entries: list[dict], hardware: list[dict]) -> str:
    lines = [
        "# Pinned upstream material",
        "",
        "Written by `python -m gpuplan.upstream.refresh [--reference DIR]`; do not edit by hand",
        "(`sources.json` holds the same facts for programs).",
        "",
        "## CRD schemas and their CEL rules",
        "",
        "Each schema is the CRD's `spec.versions[].schema.openAPIV3Schema` at the pinned commit, in",
        "strict form (`additionalProperties: false` on every object with `properties`, except under",
        "`x-kubernetes-preserve-unknown-fields`), with `description` keywords removed to keep the",
        "package small. The `x-kubernetes-validations` (CEL) rules stay in the schema, where",
        "`gpuplan verify` evaluates them; `cel/*.cel.json` lists them per CRD. Every version the",
        "pinned release serves is pinned; `sources.json` has the deprecation warning of a deprecated one.",
        "",
        "| schema | apiVersion / kind | CEL rules | repository | tag | commit (date) | path |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        date = f" ({e['date']})" if e["date"] else ""
        deprecated = " (deprecated)" if e.get("deprecated") else ""
        lines.append(f"| `{e['schema']}` | {e['apiVersion']} {e['kind']}{deprecated} | {e['celRules']} | {e['repository']} | "
                     f"{e['tag']} | {e['commit']}{date} | `{e['path']}` |")
    lines += ["", "## Hardware and cloud facts", "", "| file | source |", "|---|---|"]
    for h in hardware:
        if "repository" in h:
            src = f"{h['repository']} {h['tag']} ({h['commit']}) `{h['path']}`; {h['note']}"
        else:
            src = f"built by `{h['built_by']}`; {h['note']}"
        lines.append(f"| `{h['file']}` | {src} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuplan.upstream.refresh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, default=default_reference(),
                    help="the reference directory (default: ../shared/reference beside the repository)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a shipped file is stale")
    args = ap.parse_args(argv)
    if not args.reference.is_dir():
        print(f"no reference directory at {args.reference}", file=sys.stderr)
        return 2
    files = plan(args.reference)
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    listed = json.loads(files[HERE / "sources.json"])["crds"]
    # the schemas other refresh scripts pin are listed too (an NVIDIADriver beside ClusterPolicy)
    managed = ({p for p in files if p.is_relative_to(HERE)} | {HERE / e["cel"] for e in listed}
               | {HERE / e["schema"] for e in listed})
    groups = {g for g, _, _ in TARGETS}
    extra = [p for p in (HERE / "cel").glob("*.json") if p not in managed]
    extra += [p for g in groups for p in (HERE / "crds" / g).glob("*.json") if p not in managed]
    if args.check:
        for p in stale + extra:
            print(f"stale: {p.relative_to(REPO)}")
        return 1 if stale or extra else 0
    for p in extra:
        p.unlink()
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p], encoding="utf-8")
        print(f"wrote {p.relative_to(REPO)}")
    print(f"{len(files)} files, {len(stale)} written, {len(extra)} removed")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
