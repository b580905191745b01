"""Transition scenarios: before/after spec pairs, built as `gpuplan build` builds them (the
new tree over the old one, keeping the names old nodes carry), and replayed on a control plane
step by step in the engine's order (:func:`tests.e2e.engine.steps`). Reusable: the tenancy
boundary's tests submit their pods at each step of the same replays."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from gpuplan.compiler import Options, compile_fleet
from gpuplan.output.tree import write_tree
from tests.e2e.cluster import Deployed, deploy
from tests.e2e.engine import Step, Tree, load_tree, steps
from tests.rules.helpers import BASE, edit

REPO = Path(__file__).resolve().parents[2]
AWS = (REPO / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
FLUX = ("    gitops:\n", "    gitops:\n      engine: flux\n")

ALPHA = "        alpha-ns: {training: 8, serve: 8, notebooks: 16}\n"
BETA = ("    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {notebooks: 8}\n")
TWO = edit(BASE, ALPHA, "        alpha-ns: {training: 8, serve: 8, notebooks: 8}\n" + BETA)
BETA_MOVED = edit(edit(TWO, "        beta-ns: {notebooks: 8}\n", "        beta-ns: {training: 4}\n"),
                  "alpha-ns: {training: 8,", "alpha-ns: {training: 4,")
SERVE = "    - {name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000}\n"
RENAMED_TIER = edit(BASE, SERVE, SERVE.replace("name: serve", "name: serving")).replace(
    "serve: 8, notebooks", "serving: 8, notebooks")
BATCH = "    - {name: batch, pool: train, workload: training, priority: 500}\n"
ADDED_TIER = edit(BASE, SERVE, SERVE + BATCH).replace("{training: 8, serve: 8, notebooks: 16}",
                                                      "{training: 4, serve: 8, notebooks: 16, batch: 4}")
REMOVED_TIER = edit(BASE, "    - {name: notebooks, pool: dev, workload: interactive, priority: 10, preemption: Never}\n",
                    "").replace(", notebooks: 16}", "}")
STATIC_MIG = edit(BASE, "layout: {1g.10gb: 7}", "layout: {3g.40gb: 2}").replace(
    "serve, pool: infer, profile: 1g.10gb", "serve, pool: infer, profile: 3g.40gb")
KARPENTER_MIG = edit(AWS, "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}")

# id -> (before, after)
VOLCANO_LAB = (REPO / "examples" / "volcano.yaml").read_text(encoding="utf-8")
KUEUE_LAB = VOLCANO_LAB.replace("  queueing:\n    engine: volcano\n    volcano:\n      chartVersion: 1.15.1\n",
                                "  queueing: {}\n")
UNQUEUED_LAB = VOLCANO_LAB.replace("  queueing:\n    engine: volcano\n    volcano:\n      chartVersion: 1.15.1\n", "")
assert KUEUE_LAB != VOLCANO_LAB != UNQUEUED_LAB

SCENARIOS: dict[str, tuple[str, str]] = {
    "add-tenant": (BASE, TWO),
    "remove-tenant": (TWO, BASE),
    "rename-namespace": (BASE, BASE.replace("alpha-ns", "alpha-team")),
    "rename-tier": (BASE, RENAMED_TIER),
    "add-tier": (BASE, ADDED_TIER),
    "remove-tier": (BASE, REMOVED_TIER),
    "static-mig-layout": (BASE, STATIC_MIG),
    # two nodes: the build moves n3 and holds n5 at its old layout (gpuplan.provisioning.rollout)
    "static-mig-rollout": (BASE.replace("nodes: [n3]", "nodes: [n3, n5]"),
                           STATIC_MIG.replace("nodes: [n3]", "nodes: [n3, n5]")),
    "karpenter-mig-layout": (AWS, KARPENTER_MIG),
    "move-tenant-to-another-pool": (TWO, BETA_MOVED),
    "flux-add-tenant": (BASE.replace(*FLUX, 1), TWO.replace(*FLUX, 1)),
    "flux-remove-tier": (BASE.replace(*FLUX, 1), REMOVED_TIER.replace(*FLUX, 1)),
    "flux-static-mig-layout": (BASE.replace(*FLUX, 1), STATIC_MIG.replace(*FLUX, 1)),
    # the examples' migration pair: pool infer-a100 moves from the device plugin to DRA
    "migration-before-dra-to-dra": ((REPO / "examples" / "migration" / "before-dra.yaml").read_text(encoding="utf-8"),
                                    (REPO / "examples" / "dra.yaml").read_text(encoding="utf-8")),
    # the queueing engine changes: Kueue's rules for the queued tiers give way to Volcano's in one update
    "kueue-to-volcano": (KUEUE_LAB, VOLCANO_LAB),
    "volcano-to-kueue": (VOLCANO_LAB, KUEUE_LAB),
    # Volcano's PodGroup policy binds before any queue exists (a PodGroup admitted earlier would stay)
    "unqueued-to-volcano": (UNQUEUED_LAB, VOLCANO_LAB),
}


@dataclass
class Built:
    spec: Path
    tree: Path
    files: dict[str, bytes]
    rf: Any


def build_pair(tmp: Path, before: str, after: str) -> tuple[Built, Built]:
    """``before`` built into a tree, then ``after`` built over it (as `gpuplan build` does in a
    repository that commits generated/), each tree kept in a directory of its own."""
    out = tmp / "generated"
    built = []
    for i, text in enumerate((before, after)):
        spec = tmp / "fleet.yaml"
        spec.write_text(text, encoding="utf-8")
        c = compile_fleet(spec, out_dir=out, options=Options(keep_previous=True))
        assert c.files, [str(d) for d in c.diagnostics if d.is_error]
        write_tree(out, dict(c.files), force=True)
        keep = tmp / ("old" if i == 0 else "new")
        shutil.copytree(out, keep)
        kept_spec = tmp / f"fleet-{keep.name}.yaml"
        kept_spec.write_text(text, encoding="utf-8")
        built.append(Built(kept_spec, keep, dict(c.files), c.resolved))
    return built[0], built[1]


def replay(cp, old: Built, new: Built, after_each: Callable[[Step, Deployed], None] | None = None
           ) -> Iterator[tuple[Step, Deployed]]:
    """Deploy ``old`` onto the control plane, then apply ``new`` step by step; yields after each
    step (and once first, as step "before")."""
    d = deploy(cp, old.tree)
    yield Step("before"), d
    new_tree: Tree = load_tree(new.tree)
    d.tree = new_tree
    for st in steps(load_tree(old.tree), new_tree):
        d.apply_step(st)
        yield st, d
