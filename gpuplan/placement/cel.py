"""ValidatingAdmissionPolicy CEL, evaluated by gpuplan's one CEL engine
(:mod:`gpuplan.verify.cel`). Kubernetes adds libraries to CEL; the policy uses one
of them, the lists library's ``sum()`` (k8s.io/apiserver@v0.33.0
pkg/cel/library/lists.go), which ``gpuplan.verify.cel.K8S_FUNCTIONS`` provides with
the same meaning (integers add up; an empty list sums to 0).

Evaluation follows k8s.io/apiserver@v0.33.0 pkg/admission/plugin/policy/validating/
validator.go: ``variables`` are computed lazily by name, each validation must return
true; an error (a missing field, a bad ``int()``) counts as a failure under
``failurePolicy: Fail``.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Any


class CelError(Exception):
    pass


def program(expression: str) -> Any:
    from gpuplan.verify import cel

    try:
        return cel.expression(expression)
    except ValueError as exc:
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
    from gpuplan.verify import cel

    base = {"object": obj, "oldObject": None, "namespaceObject": namespace}
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
                _MEMO[key] = cel.run(program(expression), act)
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
        if r is False:
            return []
    for v in policy["spec"].get("variables", []):
        act = {**base, "variables": {k: x for k, x in vars_.items() if not isinstance(x, Exception)}}
        vars_[v["name"]] = run(v["expression"], act)
        var_deps[v["name"]] = _deps(v["expression"], var_deps)
    act = {**base, "variables": {k: x for k, x in vars_.items() if not isinstance(x, Exception)}}
    out = []
    for val in policy["spec"].get("validations", []):
        result = run(val["expression"], act)
        ok = (not failed) if isinstance(result, Exception) else (result is True)
        if not ok:
            out.append(val.get("message", val["expression"]))
    return out
