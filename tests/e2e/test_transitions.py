"""Transitions replayed on the API server (tests/e2e/transitions.py SCENARIOS).

For each before/after pair: the old tree is applied to a fresh control plane with the nodes its
pools registered, then the new tree step by step in the engine's order (Argo CD: sync waves,
prunes in reverse wave order; Flux: the operator's Kustomization, apply, prune). After every
step, every object applied is accepted, and every node kept from the old tree finds the
device-plugin and mig-parted configs its labels name in the ConfigMaps the API server now
holds. Static nodes are relabelled from the live NodeFeatureRules as nfd-master does on every
rule change (node-feature-discovery v0.19.0 pkg/nfd-master/nfd-api-controller.go:280-296);
Karpenter nodes keep the labels they registered with (karpenter v1.14.1
pkg/controllers/nodeclaim/lifecycle/registration.go:207-221). What the live cluster shows is
also what gpuplan's own transition model (gpuplan.report.transition) says for that step."""

from __future__ import annotations

import pytest

from gpuplan.compiler import placement_docs
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL as PLUGIN, MIG_CONFIG_LABEL as MIG, POOL_LABEL
from gpuplan.output.objdiff import tree_objects
from gpuplan.report.transition import BEFORE, tier_needs, transition, tree_configs
from tests.e2e.transitions import SCENARIOS, build_pair, replay

pytestmark = pytest.mark.slow

OPERANDS = "nvidia.com/gpu.deploy.operands"
DEPLOY_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
DEPLOY_MIG = "nvidia.com/gpu.deploy.mig-manager"


def _live_configs(cp) -> tuple[dict, dict]:
    objs = {}
    body = cp.get("/api/v1/configmaps") or {"items": []}
    for cm in body["items"]:
        objs[("ConfigMap", cm["metadata"]["namespace"], cm["metadata"]["name"])] = cm
    return tree_configs(objs)


def _live_rules(cp) -> dict[str, dict[str, str]]:
    """node name -> the labels the live NodeFeatureRules give it (nfd-master's relabelling)."""
    out: dict[str, dict[str, str]] = {}
    body = cp.get("/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules") or {"items": []}
    for rule in body["items"]:
        for r in rule["spec"]["rules"]:
            names = []
            for m in r.get("matchFeatures", []):  # the rule gpuplan writes: system.name nodename In [...]
                if m.get("feature") == "system.name":
                    names += ((m.get("matchExpressions") or {}).get("nodename") or {}).get("value") or []
            for n in names:
                out.setdefault(n, {}).update(r.get("labels") or {})
    return out


def _missing(labels: dict[str, str], plugin: dict, mig: dict) -> list[str]:
    if labels.get(OPERANDS) == "false":
        return []
    out = []
    if PLUGIN in labels and labels.get(DEPLOY_PLUGIN) != "false" and labels[PLUGIN] not in plugin:
        out.append(f"device-plugin config {labels[PLUGIN]}")
    if MIG in labels and labels.get(DEPLOY_MIG) != "false" and labels[MIG] not in mig:
        out.append(f"mig-parted config {labels[MIG]}")
    return out


def _model_step(model_steps: list[str], step: str, prev: str = BEFORE) -> str:
    """The model names only the steps that change something: a live step maps to the last model
    step at or before it (``prev``, the one the previous live step mapped to, for a Flux
    Kustomization the model does not name: the tenancy and classes ones change no node)."""
    if step == "before":
        return BEFORE
    if step in model_steps:
        return step
    if step.startswith("wave "):
        w = int(step.split()[1])
        earlier = [s for s in model_steps if s.startswith("wave ") and int(s.split()[1]) <= w]
        return earlier[-1] if earlier else BEFORE
    if not step.startswith("wave ") and step not in ("gpu-operator", "apply", "prune"):
        return prev
    return model_steps[-1]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_transition_replayed_step_by_step(name, tmp_path, clusters):
    before, after = SCENARIOS[name]
    old, new = build_pair(tmp_path, before, after)
    model = transition(tree_objects(old.files), tree_objects(new.files), tier_needs(new.rf))
    from gpuplan.placement.simulate import ert_enabled
    from gpuplan.report.nodes import fleet_nodes

    cp = clusters.start(f"transition-{name}", ("ExtendedResourceToleration",) if ert_enabled(old.rf) else ())
    try:
        problems: list[str] = []
        nodes: dict[str, dict] = {}
        static: set[str] = {n for pv in old.rf.pools for n in (pv.pool.nodes or [])}
        prev = BEFORE
        for st, d in replay(cp, old, new):
            prev = _model_step(model.steps, st.name, prev)
            if st.name == "before":
                for n in fleet_nodes(old.rf, placement_docs(old.rf), count=1):
                    code, body = cp.create(n)
                    assert code == 201, body.get("message")
                    nodes[n["metadata"]["name"]] = dict(n["metadata"].get("labels") or {})
            problems += [str(r) for r in d.refusals]
            d.refusals.clear()
            plugin, mig = _live_configs(cp)
            rules = _live_rules(cp)
            assert not static or rules, "no NodeFeatureRule selects a static node"
            for node, labels in sorted(nodes.items()):
                if node in static:
                    labels = {**{k: v for k, v in labels.items() if k not in (PLUGIN, MIG, POOL_LABEL)},
                              **rules.get(node, {})}
                live = _missing(labels, plugin, mig)
                pool = labels.get(POOL_LABEL) or nodes[node].get(POOL_LABEL)
                kind = "static" if node in static else "old"
                expected = live  # a pool the model does not track (no GPU configs)
                for generation in ("",) if node in static else (kind, ""):
                    try:
                        m = model.at(pool, prev, generation, node if node in static else None)
                    except KeyError:
                        continue
                    expected = list(m.missing) if m.present else []
                    break
                if live:
                    problems.append(f"{st.name}: node {node} (pool {pool}) lacks {', '.join(live)}"
                                    + ("" if live == expected else f"; the model says {expected or 'nothing'}"))
                elif expected:
                    problems.append(f"{st.name}: the model says node {node} (pool {pool}) lacks "
                                    f"{', '.join(expected)}; the API server holds them")
        assert not problems, "\n".join(problems)
    finally:
        clusters.stop(cp)


def _step_state(docs) -> dict:
    from gpuplan.placement.steps import STEP_KINDS, _key

    return {_key(o): o for o in docs if o.get("kind") in STEP_KINDS}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_boundary_holds_at_every_step_on_the_api_server(name, tmp_path, clusters):
    """After every step of the replay, the admission objects the API server holds are a state
    of gpuplan's step model (gpuplan.placement.steps ``sync_states``, behind GP529); the boundary
    proof of that state admits no pod past the new spec's boundary that the old tree did not; and
    every pod it enumerates, in every namespace state, gets the proof's verdict from the API
    server (the same pods as tests/e2e/test_examples.py, at each step)."""
    from gpuplan.placement.simulate import ert_enabled
    from gpuplan.placement.steps import StepProver, sync_states
    from tests.e2e.cluster import case_namespaces, disagreements
    from tests.e2e.engine import load_tree

    before, after = SCENARIOS[name]
    old, new = build_pair(tmp_path, before, after)
    old_docs, new_docs = list(load_tree(old.tree).objects.values()), list(load_tree(new.tree).objects.values())
    states = [_step_state(old_docs), *(_step_state(s) for _, s in sync_states(old_docs, new_docs,
                                                                                 new.rf.fleet.spec.cluster.gitops.engine)),
              _step_state(new_docs)]
    prover = StepProver.between(new.rf, old_docs, new_docs)
    cp = clusters.start(f"steps-{name}", ("ExtendedResourceToleration",) if ert_enabled(old.rf) else ())
    try:
        problems: list[str] = []
        held = dict(states[0])
        judged = 0
        for st, d in replay(cp, old, new):
            problems += [str(r) for r in d.refusals]
            d.refusals.clear()
            held.update(_step_state(st.apply))
            for k in _step_state(st.prune):
                held.pop(k, None)
            if held not in states:
                problems.append(f"{st.name}: the API server holds a state gpuplan's step model does not have: "
                                f"{sorted(set(held) ^ set(states[-1]))}")
                continue
            b = prover.prove(held.values(), record=True)
            problems += [f"{st.name}: {br.pod} in {br.namespace}: {br.escape}" for br in prover.windows(b)]
            case_namespaces(d, b.cases)
            problems += [f"{st.name}: {x}" for x in disagreements(cp, b.cases)]
            judged += len(b.cases)
        assert judged, "no step judged"
        assert not problems, "\n".join(problems)
    finally:
        clusters.stop(cp)
