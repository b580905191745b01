"""Refresh the pinned Volcano schemas and CEL rules: ``scheduling.volcano.sh`` Queue and PodGroup,
``batch.volcano.sh`` Job.

    python -m gpuplan.upstream.refresh_volcano [--check] VOLCANO_GIT_DIR

``VOLCANO_GIT_DIR`` is a clone (bare or not) of volcano-sh/volcano; the CRDs the Helm chart
installs (``installer/helm/chart/volcano/crd/bases/``, the same files as
``config/crd/volcano/bases/`` but for a leading ``---``) are read at :data:`TAG`. No Go module
carries them at this tag: the module proxy serves ``volcano.sh/apis`` only up to v1.14.0 and no
``volcano.sh/volcano``. Every version each CRD serves is pinned (at v1.15.1 each serves one, its
storage version: Queue and PodGroup ``v1beta1``, Job ``v1alpha1``) as
``crds/<group>/<kind>_<version>.json``, the strict schema of :func:`refresh_monitoring.crd_schema`
(the conversion Kueue's derived kinds use), descriptions removed, with its
``x-kubernetes-validations`` listed in ``cel/<kind>-<group's first label>-<version>.cel.json``
(none at this tag: Volcano checks the rest in its admission webhook, or in the
ValidatingAdmissionPolicies its chart renders with ``custom.vap_enable``). Output: those files and
``SOURCES-volcano.md``, whose rows ``python -m gpuplan.upstream.refresh`` lists in
``sources.json``. ``--check`` writes nothing and exits 1 when a shipped file differs.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpuplan.upstream.crdpin import plan_crds
from gpuplan.upstream.refresh_monitoring import table_text

REPOSITORY = "volcano-sh/volcano"
TAG = "v1.15.1"
BASES = "installer/helm/chart/volcano/crd/bases"
# (group, kind, path of the CRD at TAG)
CRDS = (
    ("scheduling.volcano.sh", "Queue", f"{BASES}/scheduling.volcano.sh_queues.yaml"),
    ("scheduling.volcano.sh", "PodGroup", f"{BASES}/scheduling.volcano.sh_podgroups.yaml"),
    ("batch.volcano.sh", "Job", f"{BASES}/batch.volcano.sh_jobs.yaml"),
)
HERE = Path(__file__).resolve().parent
SOURCES = HERE / "SOURCES-volcano.md"


def intro(rows: list[dict]) -> list[str]:
    storage = ", ".join(f"{r['kind']} {r['apiVersion'].rpartition('/')[2]}" for r in rows if r["storage"])
    return [
        "# Volcano CRD schemas (scheduling.volcano.sh, batch.volcano.sh)",
        "",
        f"Volcano {TAG} ({REPOSITORY}): the CRDs its Helm chart installs, every version each serves.",
        "Strict JSON Schemas derived from each CRD's `openAPIV3Schema` by",
        "`python -m gpuplan.upstream.refresh_volcano <volcano git dir>` (the conversion of",
        "`refresh_monitoring`, descriptions removed, CEL rules kept); no Go module carries these CRDs",
        "at this tag. `gpuplan verify` checks Queues, PodGroups and Volcano Jobs against them.",
        f"Storage versions: {storage}.",
    ]


def plan(git_dir: Path) -> dict[Path, str]:
    """Every file the refresh writes, with its content."""
    from gpuplan.upstream.refresh import dump, inline_rules, own_cel_file

    rows, files = plan_crds(git_dir, REPOSITORY, TAG, CRDS)
    for r in rows:
        files[HERE / own_cel_file(r["apiVersion"], r["kind"])] = dump(inline_rules(json.loads(files[HERE / r["file"]])))
    files[SOURCES] = table_text(intro(rows), rows)
    return files


def main(argv: list[str]) -> int:
    check = argv[:1] == ["--check"]
    args = argv[1:] if check else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    files = plan(Path(args[0]))
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    for p in stale:
        if check:
            print(f"stale: {p.relative_to(HERE)}")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(files[p], encoding="utf-8")
            print(f"wrote {p.relative_to(HERE)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
