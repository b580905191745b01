"""The CEL rules of the pinned CRDs (``x-kubernetes-validations``), evaluated
as the API server evaluates them, with a real CEL engine.

Engine: the PyPI package ``common-expression-language`` (Python bindings of
the Rust ``cel`` interpreter); docs/verify.md compares it with ``cel-python``.
It is gpuplan's one CEL engine: the DRA proof (``gpuplan.dra.proof``) compiles
and runs its DeviceClass selectors through ``expression()`` and ``run()``.

What the API server does, and this module does too
(kubernetes/apiextensions-apiserver, pkg/apiserver/schema/cel/validation.go):

* every rule of a schema node runs with ``self`` bound to each value at that
  node (each list item, each map value), after structural defaults are
  applied (pkg/apiserver/schema/defaulting), when the value is present;
* a rule that is false rejects the object with the rule's ``message``; a rule
  whose evaluation fails (``int("x")``, a missing field) rejects it too;
* transition rules (those that read ``oldSelf``) run only on update, when an
  old value exists at the same place: with no old object they do not run,
  on create the API server skips them as well.

Kubernetes adds CEL libraries to the standard ones (k8s.io/apiserver
pkg/cel/library, cel-go ext). Only the functions the pinned rules call are
added here (``K8S_FUNCTIONS``); ``coverage()`` proves every rule compiles and
calls nothing else, and lists the rest with the reason.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

E_RULE = Code(
    "GP840", "CEL validation rule fails", Severity.ERROR,
    "A `x-kubernetes-validations` rule of the object's CRD evaluates to false: the API server rejects "
    "the object with the rule's message. JSON Schema tools (kubeconform, check-jsonschema) cannot see this.",
    bad="apiVersion: karpenter.sh/v1\nkind: NodePool\nspec:\n  template:\n    metadata:\n"
        "      labels: {karpenter.sh/team: ml}   # label domain \"karpenter.sh\" is restricted",
    good="apiVersion: karpenter.sh/v1\nkind: NodePool\nspec:\n  template:\n    metadata:\n"
         "      labels: {example.com/team: ml}",
)
E_RULE_ERROR = Code(
    "GP841", "CEL validation rule cannot be evaluated", Severity.ERROR,
    "Evaluating a CRD's CEL rule on this object fails (a value that does not parse, a missing field): "
    "the API server rejects the object as well.",
    bad="requirements:\n  - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: [\"two\"]}",
    good="requirements:\n  - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: [\"2\"]}",
)
I_NOT_EVALUATED = Code(
    "GP842", "CEL rule not evaluated", Severity.INFO,
    "A CEL rule of the object's CRD was not evaluated, and why: a transition rule (it reads `oldSelf`) "
    "with no earlier version of the object (the API server skips it on create too), or a rule "
    "`gpuplan verify --cel-coverage` lists as not covered.",
    bad="rule: self.group == oldSelf.group   # nodeClassRef.group is immutable",
    good="gpuplan verify --base old-tree/ generated/   # evaluates transition rules against the old objects",
)

E_COST = Code(
    "GP843", "CEL rule over the cost budget", Severity.ERROR,
    "A CEL rule would cost more on this object than the API server allows: 1,000,000 per rule "
    "evaluation, 10,000,000 for all rules of one object (k8s.io/apiserver pkg/apis/cel/config.go: "
    "PerCallLimit, RuntimeCELCostBudget); the API server refuses the object (`call cost exceeds limit`, "
    "`running out of cost budget`). gpuplan does not run the rule. Its estimate is an upper bound, "
    "values ** (comprehension nesting + 1) of what the rule's `self` holds, so it may refuse an object "
    "the API server would admit; no object a real fleet generates comes near it.",
    bad="spec:\n  kubelet:\n    evictionSoft: {k0: 1%, k1: 1%, ...}   # 8,000 keys",
    good="spec:\n  kubelet:\n    evictionSoft: {memory.available: 5%}\n"
         "    evictionSoftGracePeriod: {memory.available: 1m}",
)

CODES = (E_RULE, E_RULE_ERROR, I_NOT_EVALUATED, E_COST)

# --- cost ------------------------------------------------------------------------------------
#
# The API server bounds CEL by cost, not time (k8s.io/apiserver pkg/apis/cel/config.go):
# PerCallLimit = 1,000,000 per rule evaluation, RuntimeCELCostBudget = 10,000,000 for
# all rules of one custom resource; apiextensions-apiserver
# pkg/apiserver/schema/cel/validation.go refuses the object with "call cost exceeds
# limit for rule" or "validation failed due to running out of cost budget, no further
# validation rules will be run". The Rust engine here tracks no cost, and is slower in
# shape than cel-go: reading a list or map from a variable copies it, so
# `self.a.all(e, e in self.b)` is quadratic (8,000 keys: 72 s). So each rule's cost is
# bounded *before* it runs, from the value it would run on:
#
#     estimate = S ** (k + 1)
#
# S: the values `self` (and `oldSelf`) hold, counting map keys, list items and
# scalars (a string as 1 + len // 64); k: how deep the rule nests comprehensions
# (all, exists, exists_one, map, filter) over ranges that are not parts of an
# enclosing comprehension's element (``nesting``). Each of the S ** k iterations may touch
# every value once (a copy, an `in` over a list), so this bounds the engine's work
# and cel-go's per-value charges alike. It is an upper bound: an object refused here
# may be one the API server admits (fail closed), never the reverse.
PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


def nesting(rule: str) -> int:
    """How deep ``rule`` nests comprehension macros whose range is not built from
    an enclosing comprehension's variable (``self.a.all(x, self.b.exists(...))``: 2,
    ``self.groups.all(g, g.items.all(...))``: 1, the inner ranges partition what
    ``self`` holds). Read from the rule's text: string literals skipped,
    parentheses matched."""
    stack: list[tuple[bool, str]] = []  # per open paren: (counted macro, its variable)
    deepest = i = 0
    n = len(rule)
    while i < n:
        c = rule[i]
        if c in "'\"":
            q = c * 3 if rule.startswith(c * 3, i) else c
            i += len(q)
            while i < n and not rule.startswith(q, i):
                i += 2 if rule[i] == "\\" else 1
            i += len(q)
            continue
        if c == "(":
            j = i - 1
            while j >= 0 and (rule[j].isalnum() or rule[j] == "_"):
                j -= 1
            if j >= 0 and rule[j] == "." and rule[j + 1:i] in MACROS:
                bound = {v for _, v in stack if v}
                root = _MACRO_VAR.match(_receiver(rule, j))
                var = _MACRO_VAR.match(rule, i + 1)
                stack.append((not (root and root[1] in bound), var[1] if var else ""))
            else:
                stack.append((False, ""))
            deepest = max(deepest, sum(counted for counted, _ in stack))
        elif c == ")" and stack:
            stack.pop()
        i += 1
    return deepest


_MACRO_VAR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")


def _receiver(rule: str, dot: int) -> str:
    """The expression before ``rule[dot]`` (``x.a[0].b`` of ``x.a[0].b.all(``)."""
    k = dot - 1
    while k >= 0:
        ch = rule[k]
        if ch in ")]":
            depth = 0
            while k >= 0:
                depth += rule[k] in ")]"
                depth -= rule[k] in "(["
                k -= 1
                if depth == 0:
                    break
        elif ch.isalnum() or ch in "_.":
            k -= 1
        else:
            break
    return rule[k + 1:dot]


def _size(v: Any, memo: dict[int, int]) -> int:
    if isinstance(v, dict):
        n = memo.get(id(v))
        if n is None:
            n = memo[id(v)] = 1 + sum(1 + _size(x, memo) for x in v.values())
        return n
    if isinstance(v, list):
        n = memo.get(id(v))
        if n is None:
            n = memo[id(v)] = 1 + sum(_size(x, memo) for x in v)
        return n
    if isinstance(v, str):
        return 1 + len(v) // 64
    return 1

# --- Kubernetes CEL library functions used by the pinned rules ----------------------------


def _find(s: str, pattern: str) -> str:
    """k8s regex library ``<string>.find(<string>) -> <string>``: the first
    match, or "" (k8s.io/apiserver pkg/cel/library/regex.go), with Go's
    regexp semantics through RE2 (linear in the string, whatever the pattern)."""
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def _split(s: str, sep: str) -> list[str]:
    """cel-go ext strings ``<string>.split(<string>) -> list<string>``
    (cel-go ext/strings.go; Kubernetes enables ext.Strings)."""
    return s.split(sep) if sep else list(s)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    import re2

    return re2.compile(pattern)  # re2.error, as a Go compile error, fails the evaluation


def _sum(values: list) -> Any:
    """k8s lists library ``<list<int>>.sum() -> int``: 0 for an empty list
    (k8s.io/apiserver pkg/cel/library/lists.go); used by gpuplan's admission policy."""
    total = 0
    for v in values:
        total += v
    return total


def _k8s_size(v: Any) -> int:
    """CEL ``size``: a string's length in Unicode code points (the CEL spec, and
    cel-go's String.Size, which Kubernetes uses); the engine here counts UTF-8
    bytes (``size("é") == 2``), so rules are compiled with ``size`` replaced by this
    (``k8s_rule_text``)."""
    return len(v)


def _quantity(v: Any) -> float:
    """k8s quantity library ``quantity(string)`` (k8s.io/apiserver@v0.36.3 pkg/cel/library/
    quantity.go, on since 1.28): a string that does not parse fails the evaluation. The value is
    the float ``asApproximateFloat()`` reads, which is all gpuplan's admission policy reads of it:
    so these two are ``POLICY_FUNCTIONS``, for the policies only. A CRD rule or a DRA selector
    that compares quantities (``==``, ``compareTo``) would get a float's answer; there the library
    stays unimplemented and such a rule is listed as not evaluated. A number stands for its
    string: the API server hands a policy every quantity of a decoded object as a string."""
    from gpuplan.k8squantity import parse

    q = parse(v)
    if q is None:
        raise ValueError(f"quantity({v!r}): not a Kubernetes quantity")
    return float(q)


def _as_approximate_float(q: float) -> float:
    """``<Quantity>.asApproximateFloat() -> double`` (quantity.go ``quantityGetApproximateFloat``)."""
    return q


K8S_FUNCTIONS: dict[str, Callable[..., Any]] = {"find": _find, "split": _split, "sum": _sum,
                                                 "k8sSize": _k8s_size}
# gpuplan's admission policies also read quantities (gpuplan.placement.cel)
POLICY_FUNCTIONS: dict[str, Callable[..., Any]] = {**K8S_FUNCTIONS, "quantity": _quantity,
                                                    "asApproximateFloat": _as_approximate_float}

_SIZE_CALL = re.compile(r"(?<![A-Za-z0-9_])size(?=\s*\()")


def k8s_rule_text(rule: str) -> str:
    """``rule`` as the engine must compile it to give Kubernetes' answers:
    ``size(x)`` and ``x.size()`` call ``k8sSize`` (string literals left alone)."""
    if "size" not in rule:
        return rule
    out, i, n = [], 0, len(rule)
    while i < n:
        c = rule[i]
        if c in "'\"":
            q = c * 3 if rule.startswith(c * 3, i) else c
            j = i + len(q)
            while j < n and not rule.startswith(q, j):
                j += 2 if rule[j] == "\\" else 1
            out.append(rule[i:j + len(q)])
            i = j + len(q)
            continue
        m = _SIZE_CALL.match(rule, i)
        if m:
            out.append("k8sSize")
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)

# Functions and operators every CEL engine has (the CEL standard definitions)
# plus the macros; anything else a rule calls must be in K8S_FUNCTIONS.
STANDARD = frozenset({
    "size", "int", "uint", "double", "string", "bytes", "bool", "type", "has", "dyn", "duration", "timestamp",
    "matches", "startsWith", "endsWith", "contains", "all", "exists", "exists_one", "map", "filter",
    "in", "@in", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_&&_", "_||_", "!_", "-_", "_?_:_",
    "_+_", "_-_", "_*_", "_/_", "_%_", "_[_]", "@not_strictly_false",
})


# --- the engine ----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def engine() -> Any:
    """The compiled ``cel`` extension module. The package's ``__init__`` also
    imports its command-line front end (typer, rich, prompt_toolkit: ~170 ms);
    loading the extension module alone skips that. Any surprise falls back to
    the ordinary import."""
    import importlib.machinery
    import importlib.util
    import sys

    mod = sys.modules.get("cel.cel")
    if mod is not None:
        return mod
    try:
        spec = importlib.util.find_spec("cel")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = f"{loc}/cel{suffix}"
                try:
                    ext = importlib.util.spec_from_file_location("cel.cel", path)
                    if ext is None or ext.loader is None:
                        continue
                    mod = importlib.util.module_from_spec(ext)
                    ext.loader.exec_module(mod)
                    # registered, so a later `import cel` reuses it (a PyO3
                    # module initialises once per process)
                    sys.modules["cel.cel"] = mod
                    return mod
                except (ImportError, OSError):
                    continue
    except (ImportError, ValueError):
        pass
    from cel import cel as mod  # type: ignore[no-redef]

    return mod


@dataclass(frozen=True)
class Rule:
    """One ``x-kubernetes-validations`` entry, where it sits in the schema."""

    crd: str  # "karpenter.sh/v1 NodePool"
    path: str  # "$.spec.template.metadata.labels" (as in cel/*.cel.json)
    rule: str
    message: str
    transition: bool  # reads oldSelf

    @property
    def label(self) -> str:
        return f"{self.crd} {self.path}: {self.message}"


@dataclass
class Compiled:
    rule: Rule
    program: Any = None
    unsupported: tuple[str, ...] = ()  # functions, or rule fields, gpuplan does not implement
    error: str | None = None  # the rule does not compile
    nesting: int = 0  # comprehensions nested in the rule (cost estimate)
    macro: "tuple[str, Any, str, Any] | None" = None  # a rule that is one exists()/all(): _top_macro

    @property
    def runnable(self) -> bool:
        return self.program is not None and not self.unsupported and self.error is None


@dataclass
class Node:
    """A schema node that carries rules, with its children that do."""

    schema: dict
    rules: list[Compiled] = field(default_factory=list)
    props: dict[str, "Node"] = field(default_factory=dict)
    items: "Node | None" = None
    values: "Node | None" = None  # additionalProperties (a map)


def _has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-validations"):
            return True
        return any(_has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_rules(v) for v in schema)
    return False


def _compile(rule: Rule) -> Compiled:
    cel = engine()
    try:
        program = cel.compile(k8s_rule_text(rule.rule))
    except Exception as exc:  # noqa: BLE001 - the engine's parse errors have no common base class
        return Compiled(rule, error=str(exc).splitlines()[0])
    unsupported = tuple(sorted(f for f in program.functions() if f not in STANDARD and f not in K8S_FUNCTIONS))
    return Compiled(rule, program, unsupported, nesting=nesting(rule.rule), macro=_top_macro(rule.rule))


def _tree(schema: dict, crd: str, path: str) -> Node:
    node = Node(schema)
    for v in schema.get("x-kubernetes-validations", ()):
        text = v["rule"]
        c = _compile(Rule(crd, path, text, v.get("message") or f"failed rule: {text}",
                          bool(re.search(r"\boldSelf\b", text))))
        # none of the pinned rules has these; a refresh that brings one shows in --cel-coverage
        extra = sorted(set(v) - {"rule", "message"})
        if extra:
            c.unsupported += tuple(f"rule field {k}" for k in extra)
        node.rules.append(c)
    for name, sub in schema.get("properties", {}).items():
        if _has_rules(sub):
            node.props[name] = _tree(sub, crd, f"{path}.{name}")
    if isinstance(schema.get("items"), dict) and _has_rules(schema["items"]):
        node.items = _tree(schema["items"], crd, f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), dict) and _has_rules(schema["additionalProperties"]):
        node.values = _tree(schema["additionalProperties"], crd, f"{path}[*]")
    return node


@lru_cache(maxsize=None)
def rules_tree(group: str, kind: str, version: str) -> Node | None:
    """The compiled rules of a pinned CRD, or None when it has none."""
    from gpuplan.upstream.pins import crd_schema

    schema = crd_schema(group, kind, version)
    if schema is None or not _has_rules(schema):
        return None
    return _tree(schema, f"{group}/{version} {kind}", "$")


_TRANSITION: dict[int, bool] = {}  # id of a cached rules_tree -> has transition rules


def transition_rules(node: Node | None) -> bool:
    """Whether a CRD's rules include transition rules."""
    if node is None:
        return False
    if id(node) not in _TRANSITION:
        _TRANSITION[id(node)] = any(c.rule.transition for c in all_rules(node))
    return _TRANSITION[id(node)]


def all_rules(node: Node | None) -> Iterator[Compiled]:
    if node is None:
        return
    yield from node.rules
    for child in node.props.values():
        yield from all_rules(child)
    yield from all_rules(node.items)
    yield from all_rules(node.values)


# --- evaluation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A rule that rejected a value (``error`` set when evaluation failed) or was
    not run (``skipped`` with the reason)."""

    rule: Rule
    path: tuple  # data path of ``self`` (or of the element of ``self`` that fails)
    error: str | None = None
    skipped: str | None = None
    at_key: bool = False  # path ends at a map key (point at the key, not its value)
    over_budget: str | None = None  # not run: the cost budget (GP843), and why


def evaluate(tree: Node, obj: dict, old: dict | None = None, counter: list[int] | None = None) -> Iterator[Finding]:
    """Every rule of ``tree`` on ``obj`` (schema-valid, defaults applied:
    ``schemas.apply_defaults``), with ``old`` for transition rules;
    ``counter[0]`` counts the evaluations run."""
    yield from _walk(tree, obj, old if old is not None else _MISSING, (), counter if counter is not None else [0],
                     _Budget())


_MISSING = object()


class _Budget:
    """What is left of one object's RuntimeCELCostBudget (None once spent), and
    the sizes of the values measured so far."""

    def __init__(self) -> None:
        self.left: int | None = RUNTIME_BUDGET
        self.memo: dict[int, int] = {}

    def charge(self, c: Compiled, value: Any, old: Any) -> str | None:
        """Why ``c`` must not run on ``value`` (and ``old``), or None: its estimate is charged."""
        size = _size(value, self.memo)
        if c.rule.transition and old is not _MISSING:
            size += _size(old, self.memo)
        cost = size ** (c.nesting + 1)
        if cost > PER_CALL_LIMIT:
            return (f"call cost exceeds limit: estimated {size:,}^{c.nesting + 1} (values under self, to the "
                    f"power of comprehensions nested + 1) is over the API server's per-call limit of "
                    f"{PER_CALL_LIMIT:,}; not evaluated")
        if self.left is None or cost > self.left:
            self.left = None
            return (f"validation failed due to running out of cost budget ({RUNTIME_BUDGET:,} for all rules of "
                    "one object, estimated); no further validation rules were evaluated")
        self.left -= cost
        return None


def _walk(node: Node, value: Any, old: Any, path: tuple, counter: list[int], budget: _Budget) -> Iterator[Finding]:
    if budget.left is None:
        return  # out of budget: the API server runs no further rule either
    if node.rules:
        ctx = None
        for c in node.rules:
            r = c.rule
            if not c.runnable:
                yield Finding(r, path, skipped=_why_not(c))
                continue
            if r.transition and old is _MISSING:
                yield Finding(r, path, skipped="transition rule (reads oldSelf): no earlier version of the object")
                continue
            refused = budget.charge(c, value, old)
            if refused is not None:
                yield Finding(r, path, over_budget=refused)
                if budget.left is None:
                    return
                continue
            if ctx is None or r.transition:
                ctx = engine().Context(variables={"self": value}, functions=K8S_FUNCTIONS)
                if r.transition:
                    ctx.add_variable("oldSelf", old)
            counter[0] += 1
            try:
                ok = c.program.execute(ctx)
            except Exception as exc:  # noqa: BLE001 - evaluation errors reject the object, as in the API server
                ok = _macro_again(c, value, old) if c.macro is not None else None
                if ok is None:
                    yield Finding(r, path, error=_short(exc))
                    if r.transition:
                        ctx = None
                    continue
            if ok is not True:
                where, at_key = _culprit(c, value), False
                if where is not None:
                    where, at_key = where
                yield Finding(r, path + ((where,) if where is not None else ()),
                              error=None if ok is False else f"the rule returned {ok!r}, not a bool", at_key=at_key)
            if r.transition:
                ctx = None
    if isinstance(value, dict):
        for name, child in node.props.items():
            if name in value:
                o = old.get(name, _MISSING) if isinstance(old, dict) else _MISSING
                yield from _walk(child, value[name], o, path + (name,), counter, budget)
        if node.values is not None:
            for k, v in value.items():
                o = old.get(k, _MISSING) if isinstance(old, dict) else _MISSING
                yield from _walk(node.values, v, o, path + (k,), counter, budget)
    elif isinstance(value, list) and node.items is not None:
        # list items are correlated with old ones only for list-type=map lists
        # in the API server; gpuplan does not correlate them (transition rules
        # under a list are reported as not evaluated).
        for i, v in enumerate(value):
            yield from _walk(node.items, v, _MISSING, path + (i,), counter, budget)


# --- exists() and all() with cel-go's error semantics -----------------------------------------
#
# cel-go expands `r.exists(x, p)` into a fold whose step is a logical OR and
# `r.all(x, p)` into one of logical ANDs (cel-go parser/macro.go, MakeExists,
# MakeAll), and CEL's || and && absorb errors: `exists` is true when any element
# satisfies p, even if p fails on another; `all` is false when any element fails p.
# The engine here stops at the first error. So when a rule that is one such macro
# fails to evaluate, each element is evaluated on its own and the answers
# combined as cel-go would. (A macro nested inside a larger expression keeps the
# engine's answer: docs/verify.md lists the limit.)

_TOP_MACRO = re.compile(r"\s*(exists|all)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")


def _top_macro(rule: str) -> tuple[str, Any, str, Any] | None:
    """(``exists``|``all``, range program, variable, predicate program) when the
    whole rule is ``<range>.exists(v, p)`` or ``<range>.all(v, p)``."""
    text = rule.strip()
    if not text.endswith(")"):
        return None
    depth, i, open_at = 0, len(text) - 1, None
    while i >= 0:  # the parenthesis the final one closes (literals: bail out)
        ch = text[i]
        if ch in "'\"":
            return None
        depth += ch == ")"
        depth -= ch == "("
        if depth == 0:
            open_at = i
            break
        i -= 1
    if open_at is None:
        return None
    dot = text.rfind(".", 0, open_at)
    m = _TOP_MACRO.match(text, dot + 1) if dot > 0 else None
    if m is None or m.start(1) != dot + 1 or text[dot + 1:open_at].strip() != m[1]:
        return None
    try:
        rng = engine().compile(k8s_rule_text(text[:dot]))
        pred = engine().compile(k8s_rule_text(text[m.end():-1]))
    except Exception:  # noqa: BLE001 - not a shape this can split: the engine's answer stands
        return None
    return m[1], rng, m[2], pred


def _macro_again(c: Compiled, value: Any, old: Any) -> bool | None:
    """The rule's answer with cel-go's semantics, or None when it is an error there too."""
    kind, rng, var, pred = c.macro  # type: ignore[misc]
    cel = engine()
    base = {"self": value}
    if c.rule.transition and old is not _MISSING:
        base["oldSelf"] = old
    try:
        elems = rng.execute(cel.Context(variables=base, functions=K8S_FUNCTIONS))
    except Exception:  # noqa: BLE001 - the range itself fails: an error in cel-go too
        return None
    if isinstance(elems, dict):
        elems = list(elems)
    if not isinstance(elems, list):
        return None
    failed = False
    for e in elems:
        try:
            ok = pred.execute(cel.Context(variables={**base, var: e}, functions=K8S_FUNCTIONS))
        except Exception:  # noqa: BLE001
            failed = True
            continue
        if kind == "exists" and ok is True:
            return True
        if kind == "all" and ok is False:
            return False
    return None if failed else (kind == "all")


def _culprit(c: Compiled, value: Any) -> tuple[Any, bool] | None:
    """For ``self.all(x, ...)`` over a map or list, the first key or index whose
    own one-element collection fails the rule: where to point, not what to say
    (the API server reports the whole field)."""
    if not c.rule.rule.lstrip().startswith("self.all(") or not isinstance(value, (dict, list)) or len(value) < 2:
        return None
    cel = engine()
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        one = {k: v} if isinstance(value, dict) else [v]
        try:
            ok = c.program.execute(cel.Context(variables={"self": one}, functions=K8S_FUNCTIONS))
        except Exception:  # noqa: BLE001
            ok = False
        if ok is not True:
            return k, isinstance(value, dict)
    return None


def _why_not(c: Compiled) -> str:
    if c.error:
        return f"the rule does not compile in the CEL engine: {c.error}"
    return "uses what gpuplan does not implement: " + ", ".join(c.unsupported)


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError):
        text = f"no such key: {text}"
    return text if len(text) <= 160 else text[:157] + "..."


# --- one expression outside a CRD (the DRA proof's DeviceClass selectors) --------------------


# a compiled program holds ~11 KB of the engine's memory: a 20,000-node fleet's 6,671 policy
# expressions kept at once were 75 MiB, and its proofs visit them class by class
@lru_cache(maxsize=1024)
def expression(text: str, policy: bool = False) -> Any:
    """Compile one CEL expression that is not a CRD rule. Raises ValueError
    when it does not compile, or when it calls a function that is neither
    standard nor in ``K8S_FUNCTIONS`` (``POLICY_FUNCTIONS`` with ``policy``):
    it could only fail at evaluation."""
    try:
        program = engine().compile(k8s_rule_text(text))
    except Exception as exc:  # noqa: BLE001 - the engine's parse errors have no common base class
        raise ValueError(str(exc).splitlines()[0]) from exc
    known = POLICY_FUNCTIONS if policy else K8S_FUNCTIONS
    unsupported = sorted(f for f in program.functions() if f not in STANDARD and f not in known)
    if unsupported:
        raise ValueError("calls what gpuplan does not implement: " + ", ".join(unsupported))
    return program


def run(program: Any, variables: dict[str, Any], policy: bool = False) -> Any:
    """Evaluate a compiled expression with plain-JSON ``variables`` (``policy``: an admission
    policy's, with ``POLICY_FUNCTIONS``); what the engine raises (a missing key or attribute, a
    type mismatch) propagates: for the callers, as for the API server and the scheduler, an
    error is not a false."""
    return program.execute(engine().Context(variables=variables,
                                            functions=POLICY_FUNCTIONS if policy else K8S_FUNCTIONS))


# --- coverage ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    total: int
    evaluated: int  # compile and call only implemented functions
    transition: int  # of those, transition rules (evaluated when an old object is given)
    left_out: tuple[tuple[Rule, str], ...]  # (rule, reason)
    per_crd: tuple[tuple[str, int, int], ...]  # (crd, rules, evaluated)


def coverage() -> Coverage:
    from gpuplan.upstream.pins import crd_kinds

    total = evaluated = transition = 0
    left: list[tuple[Rule, str]] = []
    per: list[tuple[str, int, int]] = []
    for g, k, v in crd_kinds():
        rules = list(all_rules(rules_tree(g, k, v)))
        ok = [c for c in rules if c.runnable]
        total += len(rules)
        evaluated += len(ok)
        transition += sum(1 for c in ok if c.rule.transition)
        left += [(c.rule, _why_not(c)) for c in rules if not c.runnable]
        per.append((f"{g}/{v} {k}", len(rules), len(ok)))
    return Coverage(total, evaluated, transition, tuple(left), tuple(per))


def render_coverage(cov: Coverage) -> str:
    pct = 100.0 * cov.evaluated / cov.total if cov.total else 100.0
    lines = [f"CEL coverage: {cov.evaluated}/{cov.total} rules of the pinned CRDs evaluated ({pct:.0f}%)",
             f"  {cov.transition} of them are transition rules (oldSelf): evaluated against an earlier "
             "version of the object (gpuplan verify --base, gpuplan build over an existing tree)", ""]
    width = max(len(c) for c, _, _ in cov.per_crd)
    for crd, n, ok in cov.per_crd:
        lines.append(f"  {crd:<{width}}  {ok:>3}/{n:<3}")
    if cov.left_out:
        lines += ["", "left out:"]
        lines += [f"  {r.label}\n    rule: {r.rule}\n    why: {why}" for r, why in cov.left_out]
    return "\n".join(lines) + "\n"
