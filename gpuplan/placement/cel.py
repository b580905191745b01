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



def evaluate_policy(policy: dict[str, Any], obj: dict[str, Any], namespace: dict[str, Any] | None) -> list[str]:
    """The messages of the validations that ``obj`` fails (empty: admitted)."""
    import celpy
    from celpy import celtypes

    base = {"object": celpy.json_to_cel(obj), "oldObject": None,
            "namespaceObject": celpy.json_to_cel(namespace) if namespace is not None else None}
    vars_: dict[str, Any] = {}
    for v in policy["spec"].get("variables", []):
        act = {**base, "variables": celtypes.MapType({celtypes.StringType(k): x for k, x in vars_.items()})}
        try:
            vars_[v["name"]] = program(v["expression"]).evaluate(act)
        except CelError:
            raise
        except Exception as exc:
            vars_[v["name"]] = exc
    act = {**base, "variables": celtypes.MapType(
        {celtypes.StringType(k): x for k, x in vars_.items() if not isinstance(x, Exception)})}
    failed = policy["spec"].get("failurePolicy", "Fail") == "Fail"
    out = []
    for val in policy["spec"].get("validations", []):
        try:
            result = program(val["expression"]).evaluate(act)
            ok = isinstance(result, celtypes.BoolType) and bool(result)
        except CelError:
            raise
        except Exception:
            ok = not failed
        if not ok:
            out.append(val.get("message", val["expression"]))
    return out
