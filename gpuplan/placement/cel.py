"""ValidatingAdmissionPolicy CEL, evaluated by gpuplan's one CEL engine
(:mod:`gpuplan.verify.cel`). Kubernetes adds libraries to CEL; the policy uses one
of them, the lists library's ``sum()`` (k8s.io/apiserver@v0.33.0
pkg/cel/library/lists.go), which ``gpuplan.verify.cel.K8S_FUNCTIONS`` provides with
the same meaning (integers add up; an empty list sums to 0), and the quantity library's
``quantity()`` read through ``asApproximateFloat()`` (``POLICY_FUNCTIONS``).

Evaluation follows k8s.io/apiserver@v0.33.0 pkg/admission/plugin/policy/validating/
validator.go: ``variables`` are computed lazily by name, each validation must return
true; an error (a missing field, a bad ``int()``) counts as a failure under
``failurePolicy: Fail``.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any


class CelError(Exception):
    pass


def program(expression: str) -> Any:
    from gpuplan.verify import cel

    try:
        return cel.expression(expression, policy=True)
    except ValueError as exc:
        raise CelError(f"CEL does not compile: {exc}: {expression}") from exc


class _Shared:
    """One engine context for every policy evaluation: a pod's values are handed to the engine
    once for every policy it is tried against (not once per policy), and each variable is bound
    again only when its value changes (compared by the memo keys, which name the values)."""

    def __init__(self) -> None:
        from gpuplan.verify import cel

        self.ctx = cel.engine().Context(variables={}, functions=cel.POLICY_FUNCTIONS)
        self.bound: dict[str, Any] = {}  # variable -> the key (or object) of the value bound

    def bind(self, name: str, value: Any, key: Any) -> None:
        if self.bound.get(name, _UNBOUND) != key:
            self.ctx.add_variable(name, value)
            self.bound[name] = key


_UNBOUND = object()


@lru_cache(maxsize=1)
def _shared() -> _Shared:
    return _Shared()


_MEMO: dict[tuple, Any] = {}
# the memo serves the evaluations of one object (its policies, its namespaces), which come one
# after another: a few thousand entries are enough, and a 20,000-node fleet's 31,000 pods do not
# keep their converted specs alive
MEMO_MAX = 4096
_OBJECT = re.compile(r"\bobject\b")
_READS_VARIABLES = re.compile(r"\bvariables\b")
_VARIABLE = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")


def _deps(expression: str, var_deps: dict[str, set[str]]) -> set[str]:
    """What an expression reads: the object, the namespace, through variables too, and
    ``variables`` where it names them."""
    out = set()
    if _READS_VARIABLES.search(expression):
        out.add("variables")
    if _OBJECT.search(expression) or "oldObject" in expression:
        out.add("object")
    if re.search(r"\brequest\b", expression):
        out.add("request")
    if "namespaceObject" in expression:
        out.add("namespace")
    for name in _VARIABLE.findall(expression):
        out |= var_deps.get(name, {"object", "request", "namespace"}) - {"variables"}
    return out


# The request of an object's creation by a user who is no controller (the proof's default).
TENANT_REQUEST = {"operation": "CREATE", "userInfo": {"username": "tenant"}}


def reads_namespace(policy: dict[str, Any]) -> bool:
    """Whether any expression of the policy reads the namespace object (else its verdict is
    the same in every namespace its binding selects)."""
    s = policy["spec"]
    exprs = [*(m["expression"] for m in s.get("matchConditions", [])), *(v["expression"] for v in s.get("variables", [])),
             *(v["expression"] for v in s.get("validations", []))]
    return any("namespaceObject" in e for e in exprs)


def object_key(obj: dict[str, Any], request: dict[str, Any] | None = None, old: dict[str, Any] | None = None) -> str:
    """What the memo knows an object's evaluations by (pass it to evaluate the same object
    against many policies)."""
    return json.dumps([obj, old, request or TENANT_REQUEST], sort_keys=True)


_PLANS: dict[int, tuple[dict[str, Any], list[tuple[str, str, set[str]]]]] = {}
def _plan(policy: dict[str, Any]) -> list[tuple[str, str, set[str]]]:
    """(part, expression, what it reads) for every expression of the policy, in order; kept
    per policy object, so the regular expressions run once per policy, not per pod."""
    hit = _PLANS.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    var_deps: dict[str, set[str]] = {}
    out = []
    s = policy["spec"]
    for mc in s.get("matchConditions", []):
        out.append(("match", mc["expression"], _deps(mc["expression"], var_deps)))
    for v in s.get("variables", []):
        var_deps[v["name"]] = _deps(v["expression"], var_deps)
        out.append(("variable:" + v["name"], v["expression"], var_deps[v["name"]]))
    for v in s.get("validations", []):
        out.append(("validation", v["expression"], _deps(v["expression"], var_deps)))
    if len(_PLANS) > 10000:
        _PLANS.clear()
    _PLANS[id(policy)] = (policy, out)
    return out


def evaluate_policy(policy: dict[str, Any], obj: dict[str, Any], namespace: dict[str, Any] | None,
                    request: dict[str, Any] | None = None, old: dict[str, Any] | None = None,
                    key: str | None = None, first_only: bool = False) -> list[str]:
    """The messages of the validations that ``obj`` fails (empty: admitted); ``request``: the
    admission request's ``operation`` and ``userInfo`` (default: a CREATE by a tenant).

    Each expression is evaluated once per value of what it reads (a pod's variables
    once for every namespace it is tried in): same expression, same inputs, same result.
    ``first_only``: stop at the first failing validation (whether, not why)."""

    request = request or TENANT_REQUEST
    base = {"object": obj, "oldObject": old, "namespaceObject": namespace, "request": request}
    keys = {"object": key if key is not None else object_key(obj, request, old),
            "request": json.dumps(request, sort_keys=True),
            "namespace": json.dumps(namespace, sort_keys=True) if namespace is not None else "null"}
    vars_: dict[str, Any] = {}
    var_expr: dict[str, str] = {}
    # the shared engine context, bound at the first evaluation the memo cannot answer: handing a
    # pod to the engine costs more than most expressions, so it is done once for all the policies
    # it is tried against, not per expression or per policy
    shared = _shared()
    state: dict[str, Any] = {"bound": False, "vars": -1}

    def context(reads_variables: bool) -> Any:
        if not state["bound"]:
            for name in ("object", "oldObject", "request"):  # the object key covers all three
                shared.bind(name, base[name], keys["object"])
            shared.bind("namespaceObject", namespace, keys["namespace"])
            state["bound"] = True
        # the variables computed so far, errors left out; bound only for an expression that reads
        # them (one that does not cannot see what another policy's evaluation left bound)
        if reads_variables and state["vars"] != len(vars_):
            live = {k: x for k, x in vars_.items() if not isinstance(x, Exception)}
            shared.bind("variables", live, (tuple((k, var_expr[k]) for k in live), keys["object"], keys["namespace"]))
            state["vars"] = len(vars_)
        return shared.ctx

    def run(expression: str, deps: set[str]) -> Any:
        # the object key covers the request too; an expression that reads only the request
        # (the UPDATE guard) is evaluated once per request
        k = (expression, keys["object"] if "object" in deps else (keys["request"] if "request" in deps else None),
             keys["namespace"] if "namespace" in deps else None,
             # what ``variables`` means here: two policies can define a variable of one name differently
             tuple(var_expr.items()) if "variables" in deps else None)
        hit = _MEMO.get(k, _MEMO)
        if hit is not _MEMO:
            return hit
        if len(_MEMO) > MEMO_MAX:
            _MEMO.clear()
        try:
            r = program(expression).execute(context("variables" in deps))
        except CelError:
            raise
        except Exception as exc:  # a CEL evaluation error (missing key, bad int())
            r = exc
        _MEMO[k] = r
        return r

    failed = policy["spec"].get("failurePolicy", "Fail") == "Fail"
    validations = iter(policy["spec"].get("validations", []))
    out = []
    for part, expression, deps in _plan(policy):
        if part == "match":
            # every condition true: the policy applies; one false: it does not; an error
            # (none false) follows failurePolicy (validating/dispatcher.go, matchconditions)
            r = run(expression, deps)
            if isinstance(r, Exception):
                return ["matchCondition failed"] if failed else []
            if r is False:
                return []
            continue
        if part.startswith("variable:"):
            name = part[len("variable:"):]
            var_expr[name] = expression
            vars_[name] = run(expression, deps)
            continue
        val = next(validations)
        result = run(expression, deps)
        if not ((not failed) if isinstance(result, Exception) else (result is True)):
            out.append(val.get("message", expression))
            if first_only:
                break
    return out
