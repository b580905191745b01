"""ValidatingAdmissionPolicy CEL, evaluated by cel-python (``celpy``).

cel-python is a pure-Python CEL implementation already used for DRA selectors
(gpuplan.dra.proof); ``common-expression-language`` binds the C++ cel-cpp and needs a
compiled wheel per platform, for no gain at this size. Kubernetes adds libraries to
CEL; the policy uses one of them, the lists library's ``sum()``
(k8s.io/apiserver@v0.33.0 pkg/cel/library/lists.go), provided here with the same
meaning (integers add up; an empty list sums to 0).

Evaluation follows k8s.io/apiserver@v0.33.0 pkg/admission/plugin/policy/validating/
validator.go: ``variables`` are computed lazily by name, each validation must return
true; an error (a missing field, a bad ``int()``) counts as a failure under
``failurePolicy: Fail``."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any


class CelError(Exception):
    pass


def _sum(values):
    from celpy import celtypes

    total = celtypes.IntType(0)
    for v in values:
        total = total + v
    return total


FUNCTIONS = {"sum": _sum}


@lru_cache(maxsize=512)
def program(expression: str):
    import celpy

    env = celpy.Environment()
    try:
        return env.program(env.compile(expression), functions=FUNCTIONS)
    except Exception as exc:  # celpy raises its own parse errors
        raise CelError(f"CEL does not compile: {exc}: {expression}") from exc



_MEMO: dict[tuple[str, str | None, str | None], Any] = {}
_OBJECT = re.compile(r"\bobject\b")
_VARIABLE = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")


def _deps(expression: str, var_deps: dict[str, set[str]]) -> set[str]:
    """What an expression reads: the object, the namespace, through variables too."""
    out = set()
    if _OBJECT.search(expression):
        out.add("object")
    if "namespaceObject" in expression:
        out.add("namespace")
    for name in _VARIABLE.findall(expression):
        out |= var_deps.get(name, {"object", "namespace"})
    return out


def evaluate_policy(policy: dict[str, Any], obj: dict[str, Any], namespace: dict[str, Any] | None) -> list[str]:
    """The messages of the validations that ``obj`` fails (empty: admitted).

    Each expression is evaluated once per value of what it reads (a pod's variables
    once for every namespace it is tried in): same expression, same inputs, same result."""
    import celpy
    from celpy import celtypes

    base = {"object": celpy.json_to_cel(obj), "oldObject": None,
            "namespaceObject": celpy.json_to_cel(namespace) if namespace is not None else None}
    keys = {"object": json.dumps(obj, sort_keys=True), "namespace": json.dumps(namespace, sort_keys=True)}
    var_deps: dict[str, set[str]] = {}
    vars_: dict[str, Any] = {}

    def run(expression: str, act: dict[str, Any]) -> Any:
        deps = _deps(expression, var_deps)
        key = (expression, keys["object"] if "object" in deps else None,
               keys["namespace"] if "namespace" in deps else None)
        if key not in _MEMO:
            if len(_MEMO) > 20000:
                _MEMO.clear()
            try:
                _MEMO[key] = program(expression).evaluate(act)
            except CelError:
                raise
            except Exception as exc:  # a CEL evaluation error (missing key, bad int())
                _MEMO[key] = exc
        return _MEMO[key]

    failed = policy["spec"].get("failurePolicy", "Fail") == "Fail"
    for mc in policy["spec"].get("matchConditions", []):
        # every condition true: the policy applies; one false: it does not; an error
        # (none false) follows failurePolicy (validating/dispatcher.go, matchconditions)
        r = run(mc["expression"], base)
        if isinstance(r, Exception):
            return [f"matchCondition {mc['name']} failed"] if failed else []
        if isinstance(r, celtypes.BoolType) and not bool(r):
            return []
    for v in policy["spec"].get("variables", []):
        act = {**base, "variables": celtypes.MapType(
            {celtypes.StringType(k): x for k, x in vars_.items() if not isinstance(x, Exception)})}
        vars_[v["name"]] = run(v["expression"], act)
        var_deps[v["name"]] = _deps(v["expression"], var_deps)
    act = {**base, "variables": celtypes.MapType(
        {celtypes.StringType(k): x for k, x in vars_.items() if not isinstance(x, Exception)})}
    out = []
    for val in policy["spec"].get("validations", []):
        result = run(val["expression"], act)
        ok = (not failed) if isinstance(result, Exception) else (isinstance(result, celtypes.BoolType) and bool(result))
        if not ok:
            out.append(val.get("message", val["expression"]))
    return out
