"""What the API server would say about one generated object, through `gpuplan verify`'s
library: the pinned strict CRD schema, then every CEL rule of the CRD evaluated with a
real CEL engine (gpuplan.verify.cel)."""

from __future__ import annotations

import json
from functools import lru_cache

from gpuplan.upstream.pins import ROOT as UPSTREAM

CEL_FAILS = "GP840"


def cel_file(name: str) -> list[dict]:
    """The pinned CEL rules of one CRD (gpuplan/upstream/cel/)."""
    return json.loads((UPSTREAM / "cel" / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _verifier():
    from gpuplan.verify.verifier import Verifier

    return Verifier()


def _problems(obj: dict):
    problems, _, _ = _verifier().check(obj)
    return problems


def refusals(obj: dict, cel_name: str) -> list[str]:
    """Messages of the CRD's CEL rules (no transition rules: there is no old object)
    that ``obj`` breaks. ``cel_name`` names the CEL file those rules are pinned in."""
    assert cel_file(cel_name), f"no pinned CEL rules in {cel_name}"
    return [p.message for p in _problems(obj) if p.code.code == CEL_FAILS]


def schema_errors(obj: dict) -> list[str]:
    """Errors of the pinned strict CRD schema (the OpenAPI part the API server checks)."""
    return [p.message for p in _problems(obj) if p.code.code != CEL_FAILS and p.code.severity.value == "error"]
