#!/usr/bin/env python3
"""Write a valid synthetic fleet spec of a given size (deterministic).

    python benchmarks/make_fleet.py --nodes 2000 --tenants 1000 -o /tmp/big/fleet.yaml

Pools (default: nodes / 20) rotate through whole-GPU H100 training, A100 MIG
inference and time-sliced L40S notebook pools of static nodes; every pool gets
one tier (MIG pools one per profile); each tenant gets --namespaces namespaces
with quotas that stay within capacity, so the spec validates cleanly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MIG_LAYOUT = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}


def make(nodes: int, tenants: int, namespaces: int = 3, pools: int | None = None) -> str:
    pools = pools or max(1, nodes // 20)
    per_pool = [nodes // pools + (1 if i < nodes % pools else 0) for i in range(pools)]
    out = [
        "# yaml-language-server: $schema=../schemas/fleet.schema.json",
        "apiVersion: gpuplan.dev/v1alpha1",
        "kind: Fleet",
        "metadata:",
        f"  name: synthetic-{nodes}n-{tenants}t",
        "spec:",
        "  cluster:",
        '    kubernetesVersion: "1.33"',
        "    gitops:",
        "      engine: argocd",
        '      repoURL: "https://git.example.com/platform/gpu-fleet.git"',
        "  pools:",
    ]
    tiers: list[tuple[str, str, int]] = []  # (tier, pool, capacity units)
    node_no = 0
    for p, count in enumerate(per_pool):
        kind = p % 3
        name = f"pool-{p:03d}"
        names = [f"gpu-{node_no + i:05d}" for i in range(count)]
        node_no += count
        out.append(f"    - name: {name}")
        if kind == 0:
            out += ["      gpu: H100-SXM5-80GB", "      gpusPerNode: 8", "      sharing: {mode: exclusive}",
                    '      topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}']
            tiers.append((f"train-{p:03d}", name, count * 8))
        elif kind == 1:
            out += ["      gpu: A100-SXM4-80GB", "      gpusPerNode: 4",
                    "      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}"]
            for prof, k in MIG_LAYOUT.items():
                tiers.append((f"infer-{p:03d}-{prof.split('.')[0]}", name, count * 4 * k))
        else:
            out += ["      gpu: L40S", "      gpusPerNode: 4", "      sharing: {mode: time-slicing, replicas: 4}"]
            tiers.append((f"notebooks-{p:03d}", name, count * 4 * 4))
        out.append("      nodes:")
        out += [f"        - {n}" for n in names]
        out.append("      pricePerGPUHour: 2.5")
    out.append("  tiers:")
    for t, (tier, pool, _) in enumerate(tiers):
        profile = ""
        if tier.startswith("infer-"):
            profile = ", profile: " + {"3g": "3g.40gb", "2g": "2g.20gb", "1g": "1g.10gb"}[tier.rsplit("-", 1)[1]]
        out.append(f"    - {{name: {tier}, pool: {pool}{profile}, priority: {1000 + t}, enforcePriority: true}}")
    # Hand out quota round-robin, one unit at a time, never above capacity.
    left = {tier: cap for tier, _, cap in tiers}
    order = [tier for tier, _, _ in tiers]
    out.append("  tenants:")
    k = 0
    for t in range(tenants):
        ns = [f"team-{t:04d}-{j}" for j in range(namespaces)]
        out.append(f"    - name: team-{t:04d}")
        out.append(f"      namespaces: [{', '.join(ns)}]")
        out.append("      quotas:")
        for n in ns:
            q = {}
            for _ in range(2):
                tier = order[k % len(order)]
                k += 1
                if left[tier] > 0:
                    q[tier] = q.get(tier, 0) + 1
                    left[tier] -= 1
            body = ", ".join(f"{a}: {b}" for a, b in q.items())
            out.append(f"        {n}: {{{body}}}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--namespaces", type=int, default=3, help="namespaces per tenant")
    ap.add_argument("--pools", type=int, default=None, help="default: nodes / 20")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    text = make(a.nodes, a.tenants, a.namespaces, a.pools)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
