"""Static pools roll a change a few nodes at a time.

nfd-master relabels every node a NodeFeatureRule matches as soon as the rule changes
(kubernetes-sigs/node-feature-discovery@v0.19.0 pkg/nfd-master/nfd-api-controller.go:280-296), and
mig-manager repartitions a node's GPUs the moment its ``nvidia.com/mig.config`` label changes
(NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577), which it cannot do while GPU
pods use them. One rule per pool would therefore repartition every node of the pool in one sync: a
two-node inference pool goes to zero capacity. The device plugin likewise restarts with a changed
``nvidia.com/device-plugin.config`` (NVIDIA/k8s-device-plugin@v0.20.0
cmd/config-manager/main.go:272-278) and advertises the new sharing at once.

So the build keeps, per static pool, the label values that disrupt a node (the *rolled* labels:
the MIG layout and the device-plugin config) as the previous tree gave them, and moves only
``rollout.maxUnavailable`` nodes (default 1) to the pool's new values per step:

- a build of a changed spec (the old tree's pool rule holds other rolled values) starts a rollout:
  the first step's nodes (in the order the pool lists them) get the new values, the rest keep theirs in a second rule of the
  same NodeFeatureRule;
- a build of the same spec keeps the split, so ``gpuplan check`` agrees with the build and a build
  that runs twice moves nothing more;
- ``gpuplan build --advance POOL`` moves the next step, once the nodes of the last one are done
  (``nvidia.com/mig.config.state=success``);
- a node new to the pool, or a pool without a previous tree (the first build), gets the new
  values at once: there is nothing running to disrupt.

The plan is pure: callers pass the label keys that roll, the old tree's rules and the label
values a held node may keep (config names the new tree still carries), so a hand edit of the old
tree can hold a node only at a config that exists.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from gpuplan.artifacts import dig
from gpuplan.identity import (
    DEVICE_PLUGIN_CONFIG_LABEL, MIG_ALL_DISABLED_CONFIG, MIG_CONFIG_LABEL, POOL_LABEL, PreviousConfigs,
    kept_mig_configs, kept_plugin_configs, pool_node_labels,
)
from gpuplan.resolve import PoolView, ResolvedFleet

# the labels whose change disrupts a running node
ROLLED_LABELS = (MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL)


@dataclass(frozen=True)
class OldRule:
    """One rule of the previous tree's NodeFeatureRule of a pool: its name, labels and nodes."""

    name: str
    labels: Mapping[str, str]
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    """Where the pool's nodes stand after this build: ``target`` nodes carry the pool's labels,
    each ``held`` entry is (rolled label values, nodes) kept at a previous change's values;
    ``moved``: the nodes this build moves to the target from other values."""

    target: tuple[str, ...]
    held: tuple[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], ...]
    moved: tuple[str, ...]
    batch: int
    want: tuple[tuple[str, str], ...] = ()  # the pool's rolled label values

    @property
    def repartitions(self) -> bool:
        """A held node's MIG layout differs from the pool's (else only its sharing)."""
        return any(dict(values).get(MIG_CONFIG_LABEL) != dict(self.want).get(MIG_CONFIG_LABEL)
                   for values, _ in self.held)

    @property
    def held_nodes(self) -> tuple[str, ...]:
        return tuple(n for _, nodes in self.held for n in nodes)

    @property
    def rolling(self) -> bool:
        return bool(self.held)


def read_rules(docs: Iterable[object], pool: str | None = None) -> tuple[OldRule, ...]:
    """The rules of the NodeFeatureRules among ``docs`` that label a pool's nodes (``pool``'s only,
    when given), as a tree holds them: name, string labels, the node names of its ``system.name``
    match. Whatever else a hand edit left there is not read."""
    out = []
    for d in docs:
        rules = dig(d, "spec", "rules") if isinstance(d, dict) and d.get("kind") == "NodeFeatureRule" else None
        for rule in rules if isinstance(rules, list) else ():
            labels = rule.get("labels") if isinstance(rule, dict) else None
            owner = labels.get(POOL_LABEL) if isinstance(labels, dict) else None
            if not isinstance(owner, str) or not owner or (pool is not None and owner != pool):
                continue
            nodes: list[str] = []
            for feat in rule.get("matchFeatures") or ():
                value = dig(feat, "matchExpressions", "nodename", "value")
                nodes += [n for n in value if isinstance(n, str)] if isinstance(value, list) else []
            name = rule.get("name")
            out.append(OldRule(name if isinstance(name, str) else "",
                               {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)},
                               tuple(nodes)))
    return tuple(out)


def target_rule_name(pool: str) -> str:
    """The name of the rule that carries a static pool's labels (gpuplan.lower.node_labels)."""
    return f"gpuplan pool {pool}"


def held_rule_name(pool: str, i: int) -> str:
    return f"{held_rule_prefix(pool)}{i}"


def held_rule_prefix(pool: str) -> str:
    """What the names of a pool's held rules start with."""
    return f"gpuplan pool {pool}, held "


def batch_size(max_unavailable: int | str, nodes: int) -> int:
    """Nodes per step: a count, or a percentage of the pool's nodes rounded up (as the DaemonSet
    controller rounds ``maxUnavailable``, kubernetes v1.36.3 pkg/controller/daemon/util/
    daemonset_util.go:153-161, ``GetScaledValueFromIntOrPercent(..., true)``); at least 1."""
    if isinstance(max_unavailable, str):
        n = math.ceil(nodes * int(max_unavailable.rstrip("%")) / 100)
    else:
        n = max_unavailable
    return max(1, n)


def plan(pool: str, nodes: Sequence[str], target: Mapping[str, str], rolled: Iterable[str],
         old_rules: Sequence[OldRule], batch: int, advance: bool, valid: Mapping[str, frozenset[str]]) -> Step:
    """The step this build writes for a static pool (module docstring). ``target``: the pool's
    labels; ``rolled``: the label keys that roll; ``old_rules``: the previous tree's rules of the
    pool; ``valid``: label key -> the values a held node may keep."""
    keys = [k for k in rolled if k in target]
    want = tuple((k, target[k]) for k in keys)
    current: dict[str, tuple[tuple[str, str], ...]] = {}
    for rule in old_rules:
        for node in rule.nodes:
            values = tuple((k, rule.labels[k]) for k in keys if k in rule.labels)
            if len(values) == len(keys) and all(v in valid.get(k, frozenset()) for k, v in values):
                current.setdefault(node, values)  # a node in two rules (a hand edit): the first
    pending = [n for n in nodes if n in current and current[n] != want]
    if not pending:
        return Step(tuple(nodes), (), (), batch, want)
    old_target = next((r for r in old_rules if r.name == target_rule_name(pool)), None)
    same = old_target is not None and tuple((k, old_target.labels.get(k)) for k in keys) == want
    move = pending[:batch] if (advance or not same) else []
    held: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for n in pending:
        if n not in move:
            held.setdefault(current[n], []).append(n)
    kept = {n for v in held.values() for n in v}
    at_target = [n for n in nodes if n not in kept]
    return Step(tuple(at_target), tuple((k, tuple(v)) for k, v in sorted(held.items())), tuple(move), batch, want)


def pool_step(rf: ResolvedFleet, pv: PoolView) -> Step | None:
    """The step of static pool ``pv`` in this build (None: not a static pool with nodes). Held
    nodes may keep only a config name the new tree's ConfigMaps carry: the pool's current one,
    one kept for the pool's old nodes (:func:`gpuplan.identity.kept_plugin_configs`,
    :func:`gpuplan.identity.kept_mig_configs`, each checked against its body), or
    ``all-disabled``."""
    if pv.pool.nodes is None or not pv.pool.nodes:
        return None
    target = pool_node_labels(rf, pv)
    prev = getattr(rf, "previous", None)
    rules = prev.static_rules.get(pv.name, ()) if isinstance(prev, PreviousConfigs) else ()
    rollout = pv.pool.rollout
    batch = batch_size(rollout.max_unavailable if rollout is not None else 1, len(pv.pool.nodes))
    want = tuple(target.get(k) for k in ROLLED_LABELS)
    if all(tuple(r.labels.get(k) for k in ROLLED_LABELS) == want for r in rules):
        return Step(tuple(pv.pool.nodes), (), (), batch)  # no node is at other values: nothing rolls
    valid = {
        DEVICE_PLUGIN_CONFIG_LABEL: frozenset(
            {n for n, (pool, _) in kept_plugin_configs(rf).items() if pool == pv.name}
            | {target.get(DEVICE_PLUGIN_CONFIG_LABEL, "")}),
        MIG_CONFIG_LABEL: frozenset(
            {n for n, (pool, _) in kept_mig_configs(rf).items() if pool == pv.name}
            | {target.get(MIG_CONFIG_LABEL, ""), MIG_ALL_DISABLED_CONFIG}),
    }
    return plan(pv.name, pv.pool.nodes, target, ROLLED_LABELS, rules, batch, pv.name in prev.advance, valid)


def step_text(pool: str, step: Step, fleet: str = "fleet.yaml") -> str:
    """One sentence on a pool's rollout: what this build moves, what stays held and the next step
    (`gpuplan build` and the change report print it)."""
    total = len(step.target) + len(step.held_nodes)
    done = [n for n in step.target if n not in step.moved]
    parts = []
    if step.moved:
        parts.append(f"now {', '.join(step.moved)}")
    if done:
        parts.append(f"done {', '.join(done)}")
    parts.append(f"held at their old layout or sharing {', '.join(step.held_nodes)}")
    first = step.moved or step.target
    they = ", ".join(first)
    if step.repartitions:
        ready = (f"{they} report{'s' if len(first) == 1 else ''} nvidia.com/mig.config.state=success "
                 f"(`kubectl get nodes -l gpuplan.dev/pool={pool} -L nvidia.com/mig.config.state`)")
    else:
        ready = (f"the device plugin of {they} advertises the new sharing "
                 f"(`kubectl get nodes -l gpuplan.dev/pool={pool} -o custom-columns=NODE:.metadata.name,"
                 "GPU:.status.allocatable`)")
    per = (f"{step.batch} of {total} node{'s' if total != 1 else ''} per step" if step.batch else
           f"its {total} nodes a step at a time")
    return (f"pool {pool} rolls {per}: "
            f"{'; '.join(parts)}. Next step: `gpuplan build {fleet} --advance {pool}` once {ready}")


def rollout_lines(rf: ResolvedFleet, fleet: str = "fleet.yaml") -> list[str]:
    """:func:`step_text` of every static pool whose change is still rolling."""
    out = []
    for pv in rf.pools:
        step = pool_step(rf, pv)
        if step is not None and step.rolling:
            out.append(step_text(pv.name, step, fleet))
    return out
