#!/usr/bin/env python3
"""Compare the two CEL engines on PyPI on the pinned CRDs' rules.

    pip install -e '.[bench]'
    python benchmarks/bench_cel_engines.py [--mutations 40] [--runs 5]

* ``common-expression-language`` (module ``cel``: Python bindings of the Rust
  ``cel`` interpreter) — what gpuplan uses;
* ``cel-python`` (module ``celpy``: a pure-Python interpreter on lark).

Correctness: every rule must compile; then every (rule, value) pair reached in
the example trees and in mutants of them (keys removed, strings emptied or put
in a restricted domain, lists emptied) is evaluated by both engines with the
same Kubernetes functions (find, split), and each result (true / false /
error) is compared with the expected one where the case is hand-written
(CASES) and with the other engine everywhere. Speed: import, compile of all
rules, evaluation of all pairs (CPU time, medians)."""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from gpuplan.upstream.pins import crd_kinds  # noqa: E402
from gpuplan.verify import cel as gcel  # noqa: E402
from gpuplan.verify.schemas import apply_defaults, crd_validator  # noqa: E402

# (kind, rule path, rule message, self, expected): expected read off the rule text by hand
NP_LABELS = "$.spec.template.metadata.labels"
NP_REQS = "$.spec.template.spec.requirements"
NC_ALIAS = "$.spec.amiSelectorTerms[*].alias"
CASES = [
    ("NodePool", NP_LABELS, 'label domain "karpenter.sh" is restricted', {"karpenter.sh/foo": "x"}, False),
    ("NodePool", NP_LABELS, 'label domain "karpenter.sh" is restricted', {"a.karpenter.sh/foo": "x"}, False),
    ("NodePool", NP_LABELS, 'label domain "karpenter.sh" is restricted', {"karpenter.sh.example.com/f": "x"}, True),
    ("NodePool", NP_LABELS, 'label domain "karpenter.sh" is restricted', {"karpenter.sh/capacity-type": "x"}, True),
    ("NodePool", NP_REQS, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
     [{"key": "k", "operator": "Gt", "values": ["two"]}], "error"),
    ("NodePool", NP_REQS, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
     [{"key": "k", "operator": "Gt", "values": ["-1"]}], False),
    ("NodePool", NP_REQS, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
     [{"key": "k", "operator": "Gt", "values": ["3"]}], True),
    ("NodePool", NP_REQS, "requirements with 'minValues' must have at least that many values specified in the "
     "'values' field", [{"key": "k", "operator": "In", "values": ["a"], "minValues": 2}], False),
    ("EC2NodeClass", "$.spec", "must specify exactly one of ['role', 'instanceProfile']",
     {"role": "r", "instanceProfile": "p", "amiSelectorTerms": [{"alias": "al2023@latest"}]}, False),
    ("EC2NodeClass", "$.spec", "must specify exactly one of ['role', 'instanceProfile']",
     {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}]}, True),
    ("EC2NodeClass", NC_ALIAS, "windows families may only specify version 'latest'", "windows2022@v1", False),
    ("EC2NodeClass", NC_ALIAS, "windows families may only specify version 'latest'", "windows2022@latest", True),
    ("EC2NodeClass", NC_ALIAS, "windows families may only specify version 'latest'", "al2023@v1", True),
    ("EC2NodeClass", "$.spec.tags", "tag contains a restricted tag matching kubernetes.io/cluster/",
     {"kubernetes.io/cluster/x": "owned"}, False),
    ("EC2NodeClass", "$.spec.subnetSelectorTerms[*].tags", "empty tag keys or values aren't supported", {"a": ""}, False),
    ("EC2NodeClass", "$.spec.subnetSelectorTerms[*].tags", "empty tag keys or values aren't supported", {"a": "b"}, True),
    ("EC2NodeClass", "$.spec.blockDeviceMappings", "must have only one blockDeviceMappings with rootVolume",
     [{"rootVolume": True}, {"rootVolume": True}], False),
]


class Rust:
    name = "common-expression-language"

    def __init__(self):
        self.cel = gcel.engine()

    def compile(self, text):
        return self.cel.compile(text)

    def run(self, prog, value, old):
        ctx = self.cel.Context(variables={"self": value}, functions=gcel.K8S_FUNCTIONS)
        if old is not None:
            ctx.add_variable("oldSelf", old)
        return prog.execute(ctx)


class Py:
    name = "cel-python"

    def __init__(self):
        import re

        import celpy
        from celpy import celtypes

        self.celpy, self.t = celpy, celtypes
        self.env = celpy.Environment()

        def find(s, pat):
            m = re.search(str(pat), str(s))
            return celtypes.StringType(m.group(0) if m else "")

        def split(s, sep):
            return celtypes.ListType([celtypes.StringType(x) for x in str(s).split(str(sep))])

        self.functions = {"find": find, "split": split}

    def compile(self, text):
        return self.env.program(self.env.compile(text), functions=self.functions)

    def run(self, prog, value, old):
        act = {"self": self.celpy.json_to_cel(value)}
        if old is not None:
            act["oldSelf"] = self.celpy.json_to_cel(old)
        r = prog.evaluate(act)
        if isinstance(r, Exception):  # celpy returns some errors as values
            raise r
        return bool(r) if isinstance(r, self.t.BoolType) else r


def outcome(engine, prog, value, old):
    try:
        r = engine.run(prog, value, old)
    except Exception:  # noqa: BLE001
        return "error"
    return r if isinstance(r, bool) else f"non-bool {r!r}"


def pairs(node, value, path=()):
    """(Compiled rule, self) for every rule reached in ``value``."""
    for c in node.rules:
        if not c.rule.transition:
            yield c, value, path
    if isinstance(value, dict):
        for k, child in node.props.items():
            if k in value:
                yield from pairs(child, value[k], path + (k,))
        if node.values is not None:
            for k, v in value.items():
                yield from pairs(node.values, v, path + (k,))
    elif isinstance(value, list) and node.items is not None:
        for i, v in enumerate(value):
            yield from pairs(node.items, v, path + (i,))


def mutants(obj, rng, n):
    leaves = []

    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                leaves.append((path, k))
                walk(x, path + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, path + (i,))

    walk(obj.get("spec", {}), ("spec",))
    for _ in range(n):
        m = copy.deepcopy(obj)
        path, key = rng.choice(leaves)
        parent = m
        for p in path:
            parent = parent[p]
        op = rng.randrange(4)
        if op == 0:
            del parent[key]
        elif op == 1 and isinstance(parent[key], str):
            parent[key] = ""
        elif op == 2:
            parent[f"karpenter.sh/x{rng.randrange(9)}"] = "v"
        elif isinstance(parent[key], list):
            parent[key] = []
        else:
            parent[key] = "karpenter.sh/" + str(parent[key])[:8]
        yield m


def corpus(mutations: int):
    import yaml

    from gpuplan.compiler import compile_fleet

    objs = []
    for spec in sorted((REPO / "examples").glob("*.yaml")):
        c = compile_fleet(spec)
        for name, data in sorted(c.files.items()):
            if name.endswith(".yaml"):
                objs += [d for d in yaml.safe_load_all(data) if isinstance(d, dict) and "kind" in d]
    trees = {k: (gcel.rules_tree(g, k, v), g, v) for g, k, v in crd_kinds()}
    rng = random.Random(1)
    out = []
    for o in objs:
        t = trees.get(o["kind"])
        if not t or t[0] is None or o["apiVersion"] != f"{t[1]}/{t[2]}":
            continue
        validator = crd_validator(t[1], o["kind"], t[2])
        for m in [o, *mutants(o, rng, mutations)]:
            m = apply_defaults(t[0].schema, m)
            schema_ok = not any(True for _ in validator.iter_errors(m))
            out += [(c, v, schema_ok) for c, v, _ in pairs(t[0], m)]
    return out


def import_ms(stmt: str, runs: int) -> float:
    xs = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], capture_output=True, text=True)
        xs.append(int(r.stderr.strip().splitlines()[-1].split("|")[1]) / 1000)
    return statistics.median(xs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutations", type=int, default=40, help="mutants per example object")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    rules = [c.rule for g, k, v in crd_kinds() for c in gcel.all_rules(gcel.rules_tree(g, k, v))]
    engines = [Rust(), Py()]
    progs = {}
    print(f"{len(rules)} rules in the pinned CRDs")
    for e in engines:
        ok, failed, ts = {}, [], []
        for _ in range(args.runs):
            t = time.process_time()
            for r in rules:
                try:
                    ok[r] = e.compile(r.rule)
                except Exception as exc:  # noqa: BLE001
                    failed.append((r, exc))
            ts.append(time.process_time() - t)
        progs[e.name] = ok
        print(f"{e.name}: compiles {len(ok)}/{len(rules)} rules, {statistics.median(ts) * 1000:.1f} ms for all"
              + "".join(f"\n  cannot compile: {r.label}: {x}" for r, x in failed[: len(failed) // args.runs]))
    by_msg = {(c.rule.crd.split()[-1], c.rule.path, c.rule.message): c for c in
              (c for g, k, v in crd_kinds() for c in gcel.all_rules(gcel.rules_tree(g, k, v)))}
    print(f"\nhand-written cases ({len(CASES)}):")
    for e in engines:
        wrong = []
        for kind, path, msg, value, want in CASES:
            c = by_msg[(kind, path, msg)]
            got = outcome(e, progs[e.name][c.rule], value, None) if c.rule in progs[e.name] else "no compile"
            if got != want:
                wrong.append(f"{kind} {msg!r} on {value!r}: {got}, expected {want}")
        print(f"  {e.name}: {len(CASES) - len(wrong)}/{len(CASES)} as expected" + "".join(f"\n    {w}" for w in wrong))
    every = corpus(args.mutations)
    pairs_ = [(c, v) for c, v, ok in every if ok]
    print(f"\ndifferential: {len(pairs_)} (rule, value) pairs from the example trees and their schema-valid mutants "
          "(what gpuplan verify evaluates)")
    results = {}
    for e in engines:
        ts = []
        for _ in range(args.runs):
            t = time.process_time()
            res = [outcome(e, progs[e.name][c.rule], v, None) if c.rule in progs[e.name] else "no compile"
                   for c, v in pairs_]
            ts.append(time.process_time() - t)
        results[e.name] = res
        n_false = sum(1 for r in res if r is False)
        n_err = sum(1 for r in res if r == "error")
        print(f"  {e.name}: {statistics.median(ts) * 1000:.0f} ms ({statistics.median(ts) / len(pairs_) * 1e6:.1f} µs "
              f"per evaluation); {n_false} false, {n_err} errors")
    a, b = (results[e.name] for e in engines)
    diff = [(c, v, x, y) for (c, v), x, y in zip(pairs_, a, b) if x != y]
    print(f"  engines disagree on {len(diff)} of {len(pairs_)} pairs")
    seen = set()
    for c, v, x, y in diff:
        if c.rule.label in seen:
            continue
        seen.add(c.rule.label)
        print(f"    {c.rule.label}\n      self={str(v)[:100]}\n      {engines[0].name}: {x}; {engines[1].name}: {y}")
    bad = [(c, v) for c, v, ok in every if not ok]
    outs = [[outcome(e, progs[e.name][c.rule], v, None) for c, v in bad] for e in engines]
    split = sum(1 for x, y in zip(*outs) if x != y)
    wrong_type = sum(1 for x, y in zip(*outs) if x == "error" and y is True)
    print(f"\non schema-invalid mutants ({len(bad)} pairs; gpuplan verify stops at the schema error): engines disagree "
          f"on {split}; {wrong_type} of them are a rule run on a value of the wrong type (a string where the rule "
          f"iterates a map): {engines[0].name} raises, as cel-go does; {engines[1].name} answers true")
    print("\nimport (ms, median of -X importtime):")
    print(f"  cel package: {import_ms('import cel', args.runs):.0f}; cel extension alone "
          f"(gpuplan.verify.cel.engine): {import_ms('from gpuplan.verify.cel import engine; engine()', args.runs):.0f}; "
          f"celpy: {import_ms('import celpy', args.runs):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
