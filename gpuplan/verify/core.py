"""The API server's Go validation of the core kinds gpuplan emits.

kubernetes-validate gives the OpenAPI schema of a built-in kind (types,
required fields, unknown fields); the API server then runs the kind's Go
validation, which no schema expresses. This module is that second step, one
path per kind, for what gpuplan writes (Namespace, ResourceQuota,
PriorityClass, ConfigMap, ValidatingAdmissionPolicy and its Binding,
DaemonSet), with the update rules ``--base`` (or the tree a build replaces)
makes checkable. Each rule cites its upstream function in kubernetes/kubernetes:

* pkg/apis/core/validation/validation.go: ValidateObjectMeta (names, labels),
  ValidateResourceQuota(Update), ValidateNamespace, ValidateConfigMap(Update);
* pkg/apis/core/helper/helpers.go: IsStandardQuotaResourceName,
  IsIntegerResourceName, IsResourceQuotaScopeValidForResource;
* pkg/apis/scheduling/validation/validation.go: ValidatePriorityClass(Update);
* pkg/apis/admissionregistration/validation/validation.go:
  ValidateValidatingAdmissionPolicy, ValidateValidatingAdmissionPolicyBinding;
* pkg/apis/apps/validation/validation.go: ValidateDaemonSet(Update).

Findings are ``(path, message, hint)``; the caller adds the code and position.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Callable, Iterator

from gpuplan.k8snames import DNS_LABEL, DNS_SUBDOMAIN, LABEL_VALUE
from gpuplan.k8squantity import parse as parse_quantity
# GP846 lives in gpuplan.verify.schemas (a module the code registry lists)
from gpuplan.verify.schemas import E_CORE_VALIDATION  # noqa: F401 - verify/__init__ uses core.E_CORE_VALIDATION

Finding = tuple[tuple, str, "str | None"]


def drop_nulls(v: Any) -> Any:
    """``v`` without null map values: a built-in kind is decoded into Go structs,
    where null is the field's zero value (omitted on the way out)."""
    if isinstance(v, dict):
        return {k: drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_nulls(x) for x in v]
    return v


# --- k8s.io/apimachinery/pkg/util/validation/validation.go -------------------------------

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# a label key (short DNS prefix, short name) and value that is certainly valid: the fast path
_FAST_LABEL = re.compile(r"(?=[^=]{1,120}=)(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?="
                         r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def is_dns1123_label(s: str) -> str | None:
    if len(s) > 63:
        return "must be no more than 63 characters"
    if not DNS_LABEL.match(s):
        return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must " \
               "start and end with an alphanumeric character"
    return None


def is_dns1123_subdomain(s: str) -> str | None:
    if len(s) > 253:
        return "must be no more than 253 characters"
    if not DNS_SUBDOMAIN.match(s):
        return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " \
               "and must start and end with an alphanumeric character"
    return None


def is_qualified_name(s: str) -> str | None:
    """IsQualifiedName: ``[prefix/]name``, name <= 63, prefix a DNS subdomain."""
    prefix, slash, name = s.rpartition("/")
    if s.count("/") > 1:
        return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional " \
               "DNS subdomain prefix and '/'"
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        why = is_dns1123_subdomain(prefix)
        if why:
            return "prefix part " + why
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end " \
               "with an alphanumeric character"
    return None


# --- quantities (k8s.io/apimachinery/pkg/api/resource/quantity.go, ParseQuantity) ---------

quantity = parse_quantity  # the value of a quantity (k8s.io/apimachinery quantity.go ParseQuantity), or None


def _milli_ceil(q: Fraction) -> int:
    """Quantity.MilliValue(): the value in thousandths, rounded up."""
    n = q * 1000
    return -((-n.numerator) // n.denominator)


# --- ResourceQuota --------------------------------------------------------------------------

# pkg/apis/core/helper/helpers.go
_STANDARD_QUOTA = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "services",
    "replicationcontrollers", "resourcequotas", "secrets", "persistentvolumeclaims", "configmaps",
    "services.nodeports", "services.loadbalancers"})
_STANDARD_RESOURCES = _STANDARD_QUOTA | {"storage"}
_INTEGER = frozenset({"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
                      "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"})
_SCOPES = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                     "CrossNamespacePodAffinity", "VolumeAttributesClass"})
_POD_COMPUTE = frozenset({"pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_SCOPE_RESOURCES = {
    "Terminating": _POD_COMPUTE, "NotTerminating": _POD_COMPUTE, "NotBestEffort": _POD_COMPUTE,
    "PriorityClass": _POD_COMPUTE, "CrossNamespacePodAffinity": _POD_COMPUTE, "BestEffort": frozenset({"pods"}),
    "VolumeAttributesClass": frozenset({"persistentvolumeclaims", "requests.storage"}),
}


def _hugepages(name: str) -> bool:
    return name.startswith(("hugepages-", "requests.hugepages-"))


def _standard_quota(name: str) -> bool:
    return name in _STANDARD_QUOTA or _hugepages(name)


def _extended(name: str) -> bool:
    """IsExtendedResourceName: has a domain outside kubernetes.io, not requests.-prefixed."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name) is None


def _resource_quota(obj: dict, old: dict | None) -> Iterator[Finding]:
    spec = obj.get("spec") or {}
    hard = spec.get("hard") or {}
    for k, v in hard.items():
        path = ("spec", "hard", k)
        # ValidateResourceQuotaResourceName -> validateResourceName
        why = is_qualified_name(k)
        if why:
            yield path, f"spec.hard[{k}]: {why}", None
            continue
        if "/" not in k and not (k in _STANDARD_RESOURCES or _hugepages(k)):
            yield path, f"spec.hard[{k}]: must be a standard resource type or fully qualified", None
        elif "/" not in k and not _standard_quota(k):
            yield path, f"spec.hard[{k}]: must be a standard resource for quota", None
        q = quantity(v)
        if q is None:
            yield path, f"spec.hard[{k}]: {v!r} is not a quantity", "quantities look like 4, 500m, 64Gi"
            continue
        # ValidateResourceQuantityValue
        if q < 0:
            yield path, f"spec.hard[{k}]: must be greater than or equal to 0", None
        if (k in _INTEGER or _extended(k)) and _milli_ceil(q) % 1000:
            yield path, f"spec.hard[{k}]: must be an integer", None
    scopes = spec.get("scopes") or []
    # validateResourceQuotaScopes
    for scope in scopes:
        if scope not in _SCOPES:
            yield (("spec", "scopes"), f"spec.scopes: unsupported scope {scope!r}",
                   "scopes: " + ", ".join(sorted(_SCOPES)))
        for k in sorted(hard):
            if _standard_quota(k) and scope in _SCOPE_RESOURCES and k not in _SCOPE_RESOURCES[scope]:
                yield ("spec", "scopes"), f"spec.scopes: unsupported scope {scope} applied to resource {k}", None
    for a, b in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if a in scopes and b in scopes:
            yield ("spec", "scopes"), f"spec.scopes: conflicting scopes {a} and {b}", None
    # validateScopedResourceSelectorRequirement
    sel = spec.get("scopeSelector")
    if isinstance(sel, dict):
        named = set()
        for i, req in enumerate(sel.get("matchExpressions") or []):
            path = ("spec", "scopeSelector", "matchExpressions", i)
            name, op, values = req.get("scopeName"), req.get("operator"), req.get("values") or []
            if name not in _SCOPES:
                yield path + ("scopeName",), f"spec.scopeSelector: unsupported scope {name!r}", None
            for k in sorted(hard):
                if _standard_quota(k) and name in _SCOPE_RESOURCES and k not in _SCOPE_RESOURCES[name]:
                    yield path, f"spec.scopeSelector: unsupported scope {name} applied to resource {k}", None
            if name in ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating",
                        "CrossNamespacePodAffinity") and op != "Exists":
                yield path + ("operator",), f"spec.scopeSelector: operator must be 'Exists' for scope {name}", None
            if op in ("In", "NotIn"):
                if not values:
                    yield path + ("values",), "spec.scopeSelector: must be at least one value when `operator` " \
                                              "is 'In' or 'NotIn' for scope selector", None
            elif op in ("Exists", "DoesNotExist"):
                if values:
                    yield path + ("values",), "spec.scopeSelector: must be no value when `operator` is 'Exist' " \
                                              "or 'DoesNotExist' for scope selector", None
            else:
                yield path + ("operator",), f"spec.scopeSelector: not a valid selector operator: {op!r}", None
            named.add(name)
        for a, b in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
            if a in named and b in named:
                yield ("spec", "scopeSelector"), f"spec.scopeSelector: conflicting scopes {a} and {b}", None
    # ValidateResourceQuotaUpdate: scopes cannot change
    if old is not None and set(scopes) != set((old.get("spec") or {}).get("scopes") or []):
        yield (("spec", "scopes"), "spec.scopes: field is immutable",
               "delete and create the ResourceQuota to change its scopes")


# --- PriorityClass (pkg/apis/scheduling/validation/validation.go) --------------------------

HIGHEST_USER_PRIORITY = 1_000_000_000  # scheduling.HighestUserDefinablePriority
SYSTEM_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}


def _priority_class(obj: dict, old: dict | None) -> Iterator[Finding]:
    name = (obj.get("metadata") or {}).get("name", "")
    value = obj.get("value")
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 31 <= value < 2 ** 31:
        yield ("value",), f"value: {value} does not fit the 32-bit integer the API decodes it into", None
        return
    if isinstance(name, str) and name.startswith("system-"):
        # IsKnownSystemPriorityClass: a reserved name, with its own value, not the global default
        if SYSTEM_CLASSES.get(name) != value or obj.get("globalDefault"):
            yield ("metadata", "name"), f"metadata.name: {name!r}: priority class names with the 'system-' " \
                                        "prefix are reserved for system priority classes", \
                "choose a name without the system- prefix"
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        yield ("value",), f"value: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY:,}", None
    policy = obj.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in ("Never", "PreemptLowerPriority"):
        yield ("preemptionPolicy",), f"preemptionPolicy: unsupported value {policy!r}", "Never or PreemptLowerPriority"
    if old is not None:
        # ValidatePriorityClassUpdate
        if old.get("value") != value:
            yield ("value",), f"value: may not be changed in an update (was {old.get('value')})", \
                "create a PriorityClass with a new name, move the workloads, then delete the old one"
        if old.get("preemptionPolicy", "PreemptLowerPriority") != policy:
            yield ("preemptionPolicy",), "preemptionPolicy: field is immutable", None


# --- Namespace, ConfigMap ----------------------------------------------------------------


def _namespace(obj: dict, old: dict | None) -> Iterator[Finding]:
    for i, f in enumerate((obj.get("spec") or {}).get("finalizers") or []):
        # validateFinalizerName: qualified, or the standard "kubernetes"
        why = is_qualified_name(f) if isinstance(f, str) else "not a string"
        if why or ("/" not in f and f != "kubernetes"):
            why = why or "name is neither a standard finalizer name nor is it fully qualified"
            yield ("spec", "finalizers", i), f"spec.finalizers[{i}]: {why}", None


MAX_CONFIGMAP_BYTES = 1024 * 1024  # corev1.MaxSecretSize, also for ConfigMaps


def _config_map(obj: dict, old: dict | None) -> Iterator[Finding]:
    total = 0
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    for field, m in (("data", data), ("binaryData", binary)):
        for k, v in m.items():
            # IsConfigMapKey
            if len(k) > 253 or not _CONFIGMAP_KEY.fullmatch(k) or k in (".", "..") or k.startswith(".."):
                yield (field, k), f"{field}[{k}]: a valid config key must consist of alphanumeric characters, " \
                                  "'-', '_' or '.', and must not be '.', '..' or start with '..'", None
            if field == "binaryData" and k in data:
                yield (field, k), f"{field}[{k}]: duplicate of a key in data", None
            total += len(k) + len(v.encode("utf-8") if isinstance(v, str) else str(v))
    if total > MAX_CONFIGMAP_BYTES:
        yield (), f"data: too long, must have at most {MAX_CONFIGMAP_BYTES:,} bytes", None
    # ValidateConfigMapUpdate: an immutable ConfigMap stays as it is
    if old is not None and old.get("immutable") is True:
        if obj.get("immutable") is not True:
            yield ("immutable",), "immutable: field is immutable when `immutable` is set", None
        if data != (old.get("data") or {}) or binary != (old.get("binaryData") or {}):
            yield ("data",), "data: field is immutable when `immutable` is set", \
                "an immutable ConfigMap is replaced by a new one under another name"


# --- admissionregistration.k8s.io ----------------------------------------------------------

_CEL_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


def _vap(obj: dict, old: dict | None) -> Iterator[Finding]:
    """ValidateValidatingAdmissionPolicy -> validateValidatingAdmissionPolicySpec."""
    spec = obj.get("spec") or {}
    fp = spec.get("failurePolicy")
    if fp is not None and fp not in ("Fail", "Ignore"):
        yield ("spec", "failurePolicy"), f"spec.failurePolicy: unsupported value {fp!r}", "Fail or Ignore"
    mc = spec.get("matchConstraints")
    if not isinstance(mc, dict):
        yield ("spec",), "spec.matchConstraints: Required value", None
    elif not mc.get("resourceRules"):
        yield ("spec", "matchConstraints"), "spec.matchConstraints.resourceRules: Required value", None
    else:
        yield from _match_resources(mc, ("spec", "matchConstraints"))
    validations, audit = spec.get("validations") or [], spec.get("auditAnnotations") or []
    if not validations and not audit:
        yield ("spec",), "spec.validations: Required value: validations or auditAnnotations must contain at " \
                         "least one item", None
    for i, v in enumerate(validations):
        p = ("spec", "validations", i)
        if not str(v.get("expression") or "").strip():
            yield p, f"spec.validations[{i}].expression: Required value", None
        msg = v.get("message")
        if isinstance(msg, str):
            if "\n" in msg:
                yield p + ("message",), f"spec.validations[{i}].message: message must not contain line breaks", None
            elif msg and not msg.strip():
                yield p + ("message",), f"spec.validations[{i}].message: message must be non-empty if specified", None
        reason = v.get("reason")
        if reason is not None and reason not in ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"):
            yield p + ("reason",), f"spec.validations[{i}].reason: unsupported value {reason!r}", None
    names = set()
    for i, var in enumerate(spec.get("variables") or []):
        n = var.get("name")
        if not n or not _CEL_IDENT.fullmatch(str(n)):
            yield ("spec", "variables", i, "name"), f"spec.variables[{i}].name: must be a valid CEL identifier", None
        if not str(var.get("expression") or "").strip():
            yield ("spec", "variables", i), f"spec.variables[{i}].expression: Required value", None
        names.add(n)
    pk = spec.get("paramKind")
    if isinstance(pk, dict):
        for f in ("apiVersion", "kind"):
            if not pk.get(f):
                yield ("spec", "paramKind"), f"spec.paramKind.{f}: Required value", None


def _vap_binding(obj: dict, old: dict | None) -> Iterator[Finding]:
    """ValidateValidatingAdmissionPolicyBinding -> validateValidatingAdmissionPolicyBindingSpec."""
    spec = obj.get("spec") or {}
    name = spec.get("policyName")
    if not name:
        yield ("spec",), "spec.policyName: Required value", None
    elif is_dns1123_subdomain(name):
        yield ("spec", "policyName"), f"spec.policyName: {is_dns1123_subdomain(name)}", None
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        if ref.get("name") and ref.get("selector") is not None:
            yield ("spec", "paramRef"), "spec.paramRef: `name` and `selector` are mutually exclusive", None
        elif not ref.get("name") and ref.get("selector") is None:
            yield ("spec", "paramRef"), "spec.paramRef: one of `name` or `selector` must be set", None
        action = ref.get("parameterNotFoundAction")
        if action is None:
            yield ("spec", "paramRef"), "spec.paramRef.parameterNotFoundAction: Required value", None
        elif action not in ("Allow", "Deny"):
            yield ("spec", "paramRef", "parameterNotFoundAction"), \
                f"spec.paramRef.parameterNotFoundAction: unsupported value {action!r}", None
    actions = spec.get("validationActions") or []
    if not actions:
        yield ("spec",), "spec.validationActions: Required value: at least one validation action is required", None
    seen = set()
    for i, a in enumerate(actions):
        if a in seen:
            yield ("spec", "validationActions", i), f"spec.validationActions[{i}]: Duplicate value: {a!r}", None
        seen.add(a)
        if a not in ("Deny", "Warn", "Audit"):
            yield ("spec", "validationActions", i), f"spec.validationActions[{i}]: unsupported value {a!r}", \
                "Deny, Warn or Audit"
    if "Deny" in seen and "Warn" in seen:
        yield ("spec", "validationActions"), "spec.validationActions: Deny and Warn may not be used together", \
            "Deny already reports the failure to the client"
    mr = spec.get("matchResources")
    if isinstance(mr, dict):
        yield from _match_resources(mr, ("spec", "matchResources"))


def _match_resources(mr: dict, path: tuple) -> Iterator[Finding]:
    """validateMatchResources: the match policy and the selectors."""
    mp = mr.get("matchPolicy")
    if mp is not None and mp not in ("Exact", "Equivalent"):
        yield path + ("matchPolicy",), f"matchPolicy: unsupported value {mp!r}", None
    for sel in ("namespaceSelector", "objectSelector"):
        if isinstance(mr.get(sel), dict):
            yield from _label_selector(mr[sel], path + (sel,))
    for field in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(mr.get(field) or []):
            for part in ("apiGroups", "apiVersions", "resources", "operations"):
                vals = rule.get(part) or []
                if not vals:
                    yield path + (field, i), f"{field}[{i}].{part}: Required value", None
                elif "*" in vals and len(vals) > 1:
                    yield path + (field, i, part), f"{field}[{i}].{part}: if '*' is present, must not specify " \
                                                   "other values", None


def _label_selector(sel: dict, path: tuple) -> Iterator[Finding]:
    """metav1validation.ValidateLabelSelector."""
    for i, req in enumerate(sel.get("matchExpressions") or []):
        op, values = req.get("operator"), req.get("values") or []
        if op in ("In", "NotIn") and not values:
            yield path + ("matchExpressions", i), "matchExpressions: values must be non-empty when `operator` " \
                                                  "is 'In' or 'NotIn'", None
        elif op in ("Exists", "DoesNotExist") and values:
            yield path + ("matchExpressions", i), "matchExpressions: values must be empty when `operator` " \
                                                  "is 'Exists' or 'DoesNotExist'", None
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            yield (path + ("matchExpressions", i, "operator"),
                   f"matchExpressions: not a valid selector operator {op!r}", None)
        key = req.get("key")
        if not isinstance(key, str) or is_qualified_name(key):
            yield path + ("matchExpressions", i, "key"), f"matchExpressions key {key!r}: " \
                f"{is_qualified_name(key) if isinstance(key, str) else 'Required value'}", None
    for k, v in (sel.get("matchLabels") or {}).items():
        why = is_qualified_name(k) or _label_value(v)
        if why:
            yield path + ("matchLabels", k), f"matchLabels[{k}]: {why}", None


def _label_value(v: Any) -> str | None:
    if not isinstance(v, str):
        return "must be a string"
    if len(v) > 63:
        return "must be no more than 63 characters"
    if not LABEL_VALUE.match(v):
        return "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', " \
               "and must start and end with an alphanumeric character"
    return None


# --- DaemonSet (pkg/apis/apps/validation/validation.go, ValidateDaemonSetSpec) -------------


def _selector_matches(sel: dict, labels: dict) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        k, op, vals = req.get("key"), req.get("operator"), req.get("values") or []
        if (op == "In" and labels.get(k) not in vals) or (op == "NotIn" and k in labels and labels[k] in vals) \
                or (op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True


def _daemon_set(obj: dict, old: dict | None) -> Iterator[Finding]:
    spec = obj.get("spec") or {}
    sel = spec.get("selector")
    if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        yield ("spec",), "spec.selector: Invalid value: empty selector is invalid for daemonset", None
    else:
        yield from _label_selector(sel, ("spec", "selector"))
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not _selector_matches(sel, labels):
            yield ("spec", "template", "metadata", "labels"), \
                "spec.template.metadata.labels: `selector` does not match template `labels`", None
    pod = (spec.get("template") or {}).get("spec") or {}
    if pod.get("restartPolicy", "Always") != "Always":
        yield ("spec", "template", "spec", "restartPolicy"), \
            "spec.template.spec.restartPolicy: Unsupported value: only \"Always\" is supported", None
    strategy = (spec.get("updateStrategy") or {}).get("type")
    if strategy is not None and strategy not in ("RollingUpdate", "OnDelete"):
        yield ("spec", "updateStrategy", "type"), f"spec.updateStrategy.type: unsupported value {strategy!r}", None
    if old is not None and (old.get("spec") or {}).get("selector") != sel:
        # ValidateDaemonSetUpdate: apps/v1 selectors are immutable
        yield ("spec", "selector"), "spec.selector: field is immutable", "delete and create the DaemonSet"


# --- dispatch -----------------------------------------------------------------------------

# kind -> (apiVersion, rules that read only the shape of the object)
_RULES: dict[str, tuple[str, Callable[[dict, dict | None], Iterator[Finding]]]] = {
    "ResourceQuota": ("v1", _resource_quota),
    "Namespace": ("v1", _namespace),
    "ConfigMap": ("v1", _config_map),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io/v1", _vap),
    "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io/v1", _vap_binding),
    "DaemonSet": ("apps/v1", _daemon_set),
}
# kind -> how its name is validated (ValidateObjectMeta's nameFn); these also get
# their labels checked, and PriorityClass its whole validation (it reads the name)
NAMED: dict[str, Callable[[str], str | None]] = {
    "Namespace": is_dns1123_label, "ResourceQuota": is_dns1123_subdomain, "ConfigMap": is_dns1123_subdomain,
    "PriorityClass": is_dns1123_subdomain, "ValidatingAdmissionPolicy": is_dns1123_subdomain,
    "ValidatingAdmissionPolicyBinding": is_dns1123_subdomain, "DaemonSet": is_dns1123_subdomain,
}
_GOOD_LABELS: set[tuple[str, str]] = set()

# kinds with rules on update: a build reads the old tree's file for them
UPDATE_RULES = frozenset({"PriorityClass", "ResourceQuota", "ConfigMap", "DaemonSet"})


def validate(api: str, kind: str, obj: dict, old: dict | None) -> list[Finding]:
    """The Go validation of ``obj`` (nulls dropped) that does not read its name or label values."""
    entry = _RULES.get(kind)
    if entry is None or entry[0] != api:
        return []
    return list(entry[1](obj, old))


def validate_named(obj: dict, old: dict | None) -> list[Finding]:
    """ValidateObjectMeta's name and label rules, and PriorityClass (its rules read the name)."""
    kind = obj.get("kind")
    name_fn = NAMED.get(kind)  # type: ignore[arg-type]
    if name_fn is None:
        return []
    out: list[Finding] = []
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    # every object passes here: the usual name and labels match one regex each
    if isinstance(name, str) and not (len(name) <= 63 and DNS_LABEL.match(name)):
        why = name_fn(name)
        if why:
            out.append((("metadata", "name"), f"metadata.name: {name!r}: {why}", None))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            if v is None or (k, v) in _GOOD_LABELS:
                continue
            if isinstance(v, str) and _FAST_LABEL.fullmatch(k + "=" + v):
                if len(_GOOD_LABELS) < 100_000:  # a tree repeats its labels: remember the valid ones
                    _GOOD_LABELS.add((k, v))
                continue
            why = is_qualified_name(k) or _label_value(v)
            if why:
                out.append((("metadata", "labels", k), f"metadata.labels[{k}]: {why}", None))
    if kind == "PriorityClass" and obj.get("apiVersion") == "scheduling.k8s.io/v1":
        out += _priority_class(drop_nulls(obj), drop_nulls(old) if old is not None else None)
    return out
