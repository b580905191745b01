"""The conformance corpus (tests/verify/corpus/): upstream projects' CRD and API
validation tests translated into objects as clients send them, each with the
API server's verdict. gpuplan must give the same verdict, except for the cases
marked ``known_difference`` (docs/verify.md lists them), where it must still
differ: a fix then shows here, and the documented limit is removed.

``python -m tests.verify.test_conformance_corpus`` prints the agreement table
docs/verify.md carries."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplan.verify.verifier import Options, Verifier

CORPUS = Path(__file__).resolve().parent / "corpus"


def _merge(base: Any, patch: Any) -> Any:
    """Maps merged key by key; anything else (lists, scalars, null) replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            out[k] = _merge(out.get(k), v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def cases() -> list[tuple[str, str, dict, dict | None, str, str | None]]:
    """(suite, id, object, old, expected verdict, known difference)."""
    out = []
    for f in sorted(CORPUS.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text(encoding="utf-8"))
        for c in doc["cases"]:
            obj = c["object"] if "object" in c else _merge(doc["base"], c.get("merge", {}))
            where = f"line {c['line']}" if "line" in c else c["at"]
            name = c.get("name", "")
            out.append((doc["suite"], f"{f.stem}: {where} {name}".strip(), obj, c.get("old"), c["expect"],
                        c.get("known_difference")))
    # files kept as upstream wrote them: every object is one the API server admits
    for f in sorted((CORPUS / "nfd-e2e").glob("*.yaml")):
        for i, obj in enumerate(d for d in yaml.safe_load_all(f.read_text(encoding="utf-8")) if d):
            out.append(("nfd-e2e", f"nfd-e2e/{f.name}#{i}", obj, None, "accept", None))
    return out


def gpuplan_verdict(obj: dict, old: dict | None) -> str:
    """accept, reject, or not-verified (a kind gpuplan pins no schema for: GP834)."""
    v = Verifier(Options(kubernetes_version="1.33"))
    v.add(obj, "corpus.yaml", lambda p, k: (None, None), old)
    diags = v.result().diagnostics
    if any(d.is_error for d in diags):
        return "reject"
    if any(d.code == "GP834" for d in diags):
        return "not-verified"
    return "accept"


CASES = cases()


@pytest.mark.parametrize("suite,case,obj,old,expect,known", CASES, ids=[c[1] for c in CASES])
def test_corpus_case(suite, case, obj, old, expect, known):
    got = gpuplan_verdict(obj, old)
    if known:
        assert got != expect, f"now agrees with the API server: drop known_difference ({known}) and its docs line"
    elif got == "not-verified":
        assert expect == "accept"  # listed as not verified, never refused: counted apart in docs/verify.md
    else:
        assert got == expect


def test_every_suite_has_cases_and_sources():
    suites = {c[0] for c in CASES}
    assert {"karpenter-nodepool", "prometheus-operator-prometheusrule", "kubernetes-core", "nfd-e2e", "kueue"} <= suites
    assert all(sum(1 for c in CASES if c[0] == s) >= 10 for s in suites)


def table() -> str:
    rows: dict[str, list[int]] = {}
    for suite, _case, obj, old, expect, known in CASES:
        got = gpuplan_verdict(obj, old)
        r = rows.setdefault(suite, [0, 0, 0, 0])  # cases, agree, not verified, known differences
        r[0] += 1
        r[1] += got == expect
        r[2] += got == "not-verified"
        r[3] += bool(known)
    lines = ["| suite | cases | same verdict | not verified (GP834) | known differences |", "|---|---|---|---|---|"]
    for s, (n, a, nv, k) in rows.items():
        lines.append(f"| {s} | {n} | {a} ({100 * a / n:.0f}%) | {nv} | {k} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
