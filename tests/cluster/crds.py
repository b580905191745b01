"""The upstream CustomResourceDefinitions the test control plane installs, read from the Go
module cache of the releases gpuplan pins (``crds.json`` beside this file), never from copies in
the repository.

    python tests/cluster/crds.py OUTDIR     # writes OUTDIR/<crd-name>.yaml, one per CRD

Each entry of ``crds.json`` names a Go module, a version, a file inside the module and the kinds
(``Kind.group``) to keep from it (an empty list keeps every CRD in the file). One
``go mod download -json`` fetches every module (from the module proxy, or the local cache), run
in a temporary directory outside any Go module with ``GOFLAGS=-mod=mod`` so the repository's
go.mod plays no part. ``missing`` in ``crds.json`` lists the pinned CRDs no served module has.
Only the standard library and PyYAML (a gpuplan dependency; ruamel.yaml as a fallback) are used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PINS = HERE / "crds.json"
CRD_API = "apiextensions.k8s.io/v1"


class CRDError(RuntimeError):
    """A pinned CRD could not be had: a module did not download, or a file is not what crds.json says."""


def pins(path: Path = PINS) -> dict[str, Any]:
    return json.loads(path.read_text())


def _yaml_loader():
    """A function text -> list of documents. PyYAML (libyaml when built with it) reads YAML 1.1 as
    kubectl's sigs.k8s.io/yaml does; timestamps stay strings, as they do in JSON."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class Loader(base):  # type: ignore[misc, valid-type]
            pass

        Loader.yaml_implicit_resolvers = {
            ch: [(tag, rx) for tag, rx in rs if tag != "tag:yaml.org,2002:timestamp"]
            for ch, rs in base.yaml_implicit_resolvers.items()
        }
        return lambda text: list(yaml.load_all(text, Loader=Loader))
    try:
        from ruamel.yaml import YAML
    except ImportError as exc:
        raise CRDError("reading the CRDs needs PyYAML or ruamel.yaml (pip install pyyaml)") from exc
    y = YAML(typ="safe", pure=True)
    y.version = (1, 1)

    def load(text: str) -> list:
        return [json.loads(json.dumps(d, default=str)) for d in y.load_all(text)]
    return load


def _go_env(env: dict[str, str] | None) -> dict[str, str]:
    e = dict(os.environ if env is None else env)
    flags = [f for f in e.get("GOFLAGS", "").split() if not f.startswith("-mod=")]
    e["GOFLAGS"] = " ".join([*flags, "-mod=mod"])
    e["GOWORK"] = "off"
    e.setdefault("GO111MODULE", "on")
    return e


def _json_stream(text: str) -> list[dict]:
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


def download(modules: list[str], go: str = "go", env: dict[str, str] | None = None,
             timeout: float = 1800) -> dict[str, Path]:
    """``module@version`` -> the module's directory in the Go module cache (downloaded when absent)."""
    exe = shutil.which(go) or go
    e = _go_env(env)
    with tempfile.TemporaryDirectory(prefix="gpuplan-crds-") as cwd:
        try:
            p = subprocess.run([exe, "mod", "download", "-json", *modules], cwd=cwd, env=e,
                               capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError as exc:
            raise CRDError(f"`{go}` not found: the pinned CRDs are read from the Go module cache "
                           "(install Go, or pass go=PATH)") from exc
        except subprocess.TimeoutExpired as exc:
            raise CRDError(f"`go mod download` of {len(modules)} modules ran past {timeout:.0f}s") from exc
    try:
        objs = _json_stream(p.stdout)
    except json.JSONDecodeError:
        objs = []
    dirs: dict[str, Path] = {}
    errors: list[str] = []
    for o in objs:
        key = f"{o.get('Path')}@{o.get('Version')}"
        if o.get("Error") or not o.get("Dir"):
            errors.append(f"{key}: {o.get('Error') or 'no directory in the answer'}")
        else:
            dirs[key] = Path(o["Dir"])
    unanswered = [m for m in modules if m not in dirs and not any(x.startswith(m + ":") for x in errors)]
    errors += [f"{m}: not in the answer of `go mod download`" for m in unanswered]
    if errors:
        tail = p.stderr.strip()[-2000:]
        raise CRDError("could not download the module(s) of the pinned CRDs (tests/cluster/crds.json):\n  "
                       + "\n  ".join(errors) + (f"\n{tail}" if tail and unanswered else ""))
    return dirs


def sources(go: str = "go", env: dict[str, str] | None = None,
            path: Path = PINS) -> list[tuple[dict[str, Any], Path, list[dict]]]:
    """Each crds.json entry with its module directory and the CRDs it contributes."""
    entries = pins(path)["crds"]
    modules = sorted({f"{x['module']}@{x['version']}" for x in entries})
    dirs = download(modules, go, env)
    load = _yaml_loader()
    out = []
    for x in entries:
        mod = f"{x['module']}@{x['version']}"
        f = dirs[mod] / x["path"]
        if not f.is_file():
            raise CRDError(f"{mod}: no file {x['path']} in the module ({dirs[mod]})")
        try:
            docs = load(f.read_text(encoding="utf-8"))
        except Exception as exc:  # noqa: BLE001 - the parser's own error types differ
            raise CRDError(f"{mod}: {x['path']} is not YAML: {exc}") from exc
        crds = [d for d in docs if isinstance(d, dict) and d.get("apiVersion") == CRD_API
                and d.get("kind") == "CustomResourceDefinition"]
        if not crds:
            raise CRDError(f"{mod}: {x['path']} has no {CRD_API} CustomResourceDefinition")
        want = set(x.get("kinds") or [])
        if want:
            crds = [d for d in crds if f"{d['spec']['names']['kind']}.{d['spec']['group']}" in want]
            found = {f"{d['spec']['names']['kind']}.{d['spec']['group']}" for d in crds}
            if want - found:
                raise CRDError(f"{mod}: {x['path']} has no CRD of kind {', '.join(sorted(want - found))}")
        out.append((x, dirs[mod], crds))
    return out


def crd_documents(go: str = "go", env: dict | None = None) -> list[dict]:
    """The pinned upstream CRDs (full objects, CEL rules included), sorted by metadata.name.

    ``go``: the Go command; ``env``: the environment to run it in (default: os.environ), e.g.
    with GOMODCACHE or GOPROXY set. Raises CRDError naming the module when one cannot be had."""
    return _collect(sources(go, env)) if not pins().get("fromPackage") else sorted(
        _collect(sources(go, env)) + package_crds(), key=lambda d: d["metadata"]["name"])


def _structural(schema: Any) -> Any:
    """gpuplan keeps its pinned schemas in strict form (``additionalProperties: false`` beside
    ``properties``, for ``gpuplan verify``); a CRD's structural schema may not say both
    (k8s.io/apiextensions-apiserver pkg/apis/apiextensions/validation), and the API server prunes
    unknown fields instead: drop the strict addition again."""
    if isinstance(schema, dict):
        out = {k: _structural(v) for k, v in schema.items()}
        if out.get("additionalProperties") is False and "properties" in out:
            del out["additionalProperties"]
        return out
    if isinstance(schema, list):
        return [_structural(v) for v in schema]
    return schema


def package_crds(path: Path = PINS) -> list[dict]:
    """The CRDs whose pinned release no served Go module carries (``fromPackage`` in crds.json,
    each with the reason): built from gpuplan's own pinned copy of that release's schema
    (gpuplan/upstream/crds, refreshed from the tag by ``python -m gpuplan.upstream.refresh``),
    CEL rules included, descriptions left out as the package stores them. A version with a
    ``status`` gets the status subresource unless the entry's ``subresources`` says otherwise
    (Volcano's PodGroup: ``subresources: {}`` upstream)."""
    repo = HERE.parents[1]
    out = []
    for x in pins(path).get("fromPackage", []):
        schema = _structural(json.loads((repo / x["schema"]).read_text()))
        props = schema.get("properties", {})
        plural, kind = x["plural"], x["kind"]
        out.append({
            "apiVersion": CRD_API, "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{x['group']}"},
            "spec": {
                "group": x["group"], "scope": x["scope"],
                "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                "versions": [{"name": x["version"], "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": schema},
                              "subresources": x.get("subresources", {"status": {}} if "status" in props else {})}],
            },
        })
    return out


def _collect(srcs: list[tuple[dict[str, Any], Path, list[dict]]]) -> list[dict]:
    seen: dict[str, str] = {}
    docs: list[dict] = []
    for x, _, crds in srcs:
        for d in crds:
            name = d["metadata"]["name"]
            where = f"{x['module']}@{x['version']} {x['path']}"
            if name in seen:
                raise CRDError(f"CRD {name} pinned twice: {seen[name]} and {where}")
            seen[name] = where
            docs.append(d)
    return sorted(docs, key=lambda d: d["metadata"]["name"])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python tests/cluster/crds.py OUTDIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    try:
        srcs = sources()
        docs = _collect(srcs)
    except CRDError as exc:
        print(f"crds: {exc}", file=sys.stderr)
        return 1
    per: dict[str, tuple[Path, list[str]]] = {}
    for x, d, crds in srcs:
        per.setdefault(f"{x['module']}@{x['version']}", (d, []))[1].extend(c["metadata"]["name"] for c in crds)
    out.mkdir(parents=True, exist_ok=True)
    for d in docs:
        (out / f"{d['metadata']['name']}.yaml").write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
    for mod, (d, names) in sorted(per.items()):
        print(f"{mod}: {len(names)} CRD{'s' if len(names) != 1 else ''} ({d})")
    missing = pins().get("missing", [])
    for m in missing:
        print(f"missing: {m['kind']} ({m['pinned']})")
    print(f"{len(docs)} CRDs written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
