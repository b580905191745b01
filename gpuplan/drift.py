"""GP870-GP889: does the cluster look like the plan? (`gpuplan verify-cluster`)

Reads what ``kubectl get nodes,resourcequotas -A -o json`` prints (a ``List``,
or a ``NodeList``/``ResourceQuotaList``) and compares it with the resolved
spec, per pool:

- the nodes a static pool lists exist; every node of a pool (static: listed;
  Karpenter: labelled ``gpuplan.dev/pool`` or ``karpenter.sh/nodepool``)
  carries the labels and taints gpuplan plans for it;
- ``status.capacity`` and ``status.allocatable`` of each GPU resource equal
  what one node of the pool advertises under its sharing mode;
- on MIG pools, ``nvidia.com/mig.config.state`` is ``success`` (mig-manager
  writes ``pending``, ``rebooting``, ``success`` or ``failed``: NVIDIA/mig-parted
  v0.15.0 ``deployments/container/reconfigure-mig.sh`` lines 222-240, 484-487, 570-573);
- every ResourceQuota gpuplan emits exists with the same ``hard`` and scope.

Findings are diagnostics located at the line of fleet.yaml that planned the
thing that differs. Pure: no cluster access, no printing.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity, show
from gpuplan.identity import mig_config_name
from gpuplan.k8snames import is_dns_subdomain
from gpuplan.resolve import PoolView, ResolvedFleet

KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"

E_LIVE_INPUT = Code(
    "GP870", "cluster objects unreadable", Severity.ERROR,
    "`gpuplan verify-cluster` reads the JSON that `kubectl get nodes,resourcequotas -A -o json` "
    "prints: a List (or NodeList / ResourceQuotaList) with `items`. Anything else cannot be compared.",
    bad="kubectl get nodes -o yaml > live.json",
    good="kubectl get nodes,resourcequotas -A -o json > live.json",
)
E_NODE_MISSING = Code(
    "GP871", "planned node not in the cluster", Severity.ERROR,
    "A static pool lists a node that the cluster does not have (not joined yet, renamed, or removed).",
    bad="pools:\n  - {name: train, nodes: [gpu-01, gpu-02]}   # cluster has only gpu-01",
    good="pools:\n  - {name: train, nodes: [gpu-01]}",
)
E_NODE_LABEL = Code(
    "GP872", "node lacks a planned label", Severity.ERROR,
    "gpuplan labels each pool's nodes (`gpuplan.dev/pool`, `nvidia.com/device-plugin.config`, "
    "`nvidia.com/mig.config`, the pool's own labels) through NFD rules or the Karpenter NodePool. "
    "A missing or different label means the node gets the wrong sharing config or MIG layout.",
    bad="# node gpu-01: nvidia.com/device-plugin.config=default",
    good="# node gpu-01: nvidia.com/device-plugin.config=train",
)
E_NODE_TAINT = Code(
    "GP873", "node lacks a planned taint", Severity.ERROR,
    "The pool's taints keep non-GPU pods off its nodes. kubelet applies `--register-with-taints` only "
    "when the node first registers, so a node registered before the taint was planned lacks it.",
    bad="# node gpu-01: no taints; pool taints [nvidia.com/gpu=present:NoSchedule]",
    good="kubectl taint node gpu-01 nvidia.com/gpu=present:NoSchedule",
)
E_CAPACITY = Code(
    "GP874", "node advertises other GPU resources than planned", Severity.ERROR,
    "The node's capacity or allocatable for one of the pool's resources differs from what the spec "
    "says each node advertises (GPUs per node, sharing replicas, MIG layout): quotas and the capacity "
    "report assume the planned number.",
    bad="# pool: 4 GPUs, MIG {3g.40gb: 2}; node capacity nvidia.com/mig-3g.40gb: 4 (one GPU not split)",
    good="# node capacity nvidia.com/mig-3g.40gb: 8",
)
E_MIG_STATE = Code(
    "GP875", "MIG layout not applied on a node", Severity.ERROR,
    "mig-manager reports its progress in the node label `nvidia.com/mig.config.state`: `failed` "
    "(error) means the planned layout is not on the node; `pending`, `rebooting` or no label "
    "(warning) means it is not there yet.",
    bad="# node gpu-05: nvidia.com/mig.config.state=failed",
    good="# node gpu-05: nvidia.com/mig.config.state=success",
)
E_QUOTA_MISSING = Code(
    "GP876", "planned ResourceQuota not in the cluster", Severity.ERROR,
    "A ResourceQuota gpuplan emits is not in the cluster: the namespace's GPU use is not limited as "
    "the spec says (not synced yet, or deleted by hand).",
    bad="# vision-train has no ResourceQuota gpuplan-gpus",
    good="# argocd app sync (or flux reconcile) the generated tree",
)
E_QUOTA_DIFFERS = Code(
    "GP877", "ResourceQuota differs from the plan", Severity.ERROR,
    "The live ResourceQuota's `hard` limits or scope differ from the generated one: edited by hand, "
    "or the tree is not synced.",
    bad="# live gpuplan-gpus: requests.nvidia.com/gpu: '32'; planned '24'",
    good="# live and planned agree",
)
W_UNPLANNED_NODE = Code(
    "GP878", "node claims a pool that does not plan it", Severity.WARNING,
    "A node is labelled `gpuplan.dev/pool` (or `karpenter.sh/nodepool`) with a pool that does not "
    "exist, or with a static pool that does not list it: it gets no or stale config.",
    bad="# node gpu-09: gpuplan.dev/pool=train; pool train lists gpu-01..gpu-04",
    good="pools:\n  - {name: train, nodes: [gpu-01, gpu-02, gpu-03, gpu-04, gpu-09]}",
)
W_UNPLANNED_RESOURCE = Code(
    "GP879", "node advertises a GPU resource its pool does not plan", Severity.WARNING,
    "The node advertises an `nvidia.com/` resource (non-zero) that its pool's sharing mode does not "
    "produce, e.g. whole GPUs on a MIG node or `nvidia.com/gpu` next to `nvidia.com/gpu.shared`: "
    "the device plugin runs another config than planned.",
    bad="# pool time-sliced (nvidia.com/gpu.shared); node also advertises nvidia.com/gpu: 4",
    good="# node advertises only nvidia.com/gpu.shared: 16",
)


E_DUPLICATE_KEY = Code(
    "GP880", "duplicate key in cluster objects", Severity.ERROR,
    "An object in the `--live` JSON has the same key twice. kubectl never prints that, and a JSON "
    "reader keeps only the last one: a second `items: []` would hide every node and the cluster "
    "would look as planned. The whole input is refused.",
    bad='{"kind": "List", "items": [...nodes...], "items": []}',
    good="kubectl get nodes,resourcequotas -A -o json > live.json",
)
E_NUMBER = Code(
    "GP881", "number out of range in cluster objects", Severity.ERROR,
    "A number in the `--live` JSON is longer than 32 characters, overflows a float (`1e999`) or "
    "is `NaN`/`Infinity`. Kubernetes prints quantities as strings and counters as 64-bit integers, "
    "so such a number is not kubectl output. The whole input is refused.",
    bad='"capacity": {"nvidia.com/gpu": 99999999999999999999999999999999999}',
    good='"capacity": {"nvidia.com/gpu": "8"}',
)
E_WRONG_TYPE = Code(
    "GP882", "cluster object field of the wrong type", Severity.ERROR,
    "A field verify-cluster reads has another JSON type than the Kubernetes API gives it (labels "
    "a list, capacity a string, a taint not an object...). The message names the field by its JSON "
    "path, e.g. `items[3].metadata.labels`. Nothing is compared until the input is fixed.",
    bad='{"metadata": {"name": "gpu-01", "labels": ["gpuplan.dev/pool=train"]}}',
    good='{"metadata": {"name": "gpu-01", "labels": {"gpuplan.dev/pool": "train"}}}',
)

E_POLICY_MISSING = Code(
    "GP883", "admission policy or binding missing", Severity.ERROR,
    "A ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding gpuplan wrote is not in the cluster: "
    "without the binding the policy holds no pod to its tier's contract (a policy without a binding "
    "enforces nothing; kubernetes/kubernetes pkg/apis/admissionregistration/types.go).",
    bad="kubectl get validatingadmissionpolicybindings  # gpuplan-...-gpu-pods-gpuplan-training absent",
    good="the generated tree synced: every policy and its binding present",
)
E_POLICY_UNBOUND = Code(
    "GP884", "admission binding differs from the plan", Severity.ERROR,
    "A ValidatingAdmissionPolicyBinding gpuplan wrote names another policy, or other validationActions, "
    "than the plan: the policy it should bind is not enforced as planned (`Deny`).",
    bad="spec: {policyName: other, validationActions: [Audit]}",
    good="spec: {policyName: gpuplan-...-gpu-pods-gpuplan-training, validationActions: [Deny]}",
)
E_TOPOLOGY_LABEL = Code(
    "GP885", "node lacks a Kueue topology label", Severity.ERROR,
    "A node of a pool whose Kueue ResourceFlavor is topology-aware (`topologyName`) lacks a label of a "
    "topology level: Kueue counts only nodes that carry a label for every level of the Topology "
    "(kubernetes-sigs/kueue v0.19.2 pkg/util/tas/node.go:21-33), so this node's GPUs are never "
    "admitted to.",
    bad="labels: {gpuplan.dev/pool: train}  # no topology.example.com/rack",
    good="labels: {gpuplan.dev/pool: train, topology.example.com/rack: r1, kubernetes.io/hostname: n1}",
)
I_RETIRE_CONFIG = Code(
    "GP886", "kept config name that no node carries", Severity.INFO,
    "The generated tree keeps an old device-plugin or mig-parted config name for a pool's nodes made or "
    "labelled under it (`gpuplan.dev/kept-configs`, docs/transitions.md), and no node of the cluster carries "
    "that name any more (`nvidia.com/device-plugin.config` / `nvidia.com/mig.config`): the nodes were replaced, "
    "expired or relabelled. A new node takes the pool's current template: Karpenter labels a node only when it "
    "registers (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/registration.go:207-221), "
    "a Cluster API machine joins with the current bootstrap config, a GKE node with the node pool's labels; so "
    "no later node takes the old name: retire it with the command in the hint and commit the tree.",
    bad="# kept: batch-l4-2c101968; kubectl get nodes -l nvidia.com/device-plugin.config=batch-l4-2c101968: none",
    good="gpuplan build fleet.yaml --retire-config batch-l4-2c101968",
)
I_RETIRE_NAMESPACE = Code(
    "GP887", "kept namespace that no longer exists", Severity.INFO,
    "The fleet's AppProject keeps a namespace that left the spec as a destination "
    "(`gpuplan.dev/kept-namespaces`), so that Argo CD admits the prune of what its tenant left there "
    "(docs/transitions.md); the cluster has no such namespace any more, so nothing is left to prune: "
    "retire it with the command in the hint and commit the tree.",
    bad="# AppProject keeps beta-ns; kubectl get namespace beta-ns -> NotFound",
    good="gpuplan build fleet.yaml --retire-namespace beta-ns",
)
I_RETIRE_RESOURCE = Code(
    "GP888", "kept GPU resource name that no node advertises", Severity.INFO,
    "The namespaces' `gpuplan-gpus` quotas keep a GPU resource name the spec no longer advertises at 0 "
    "(a MIG profile left a layout, a shared name went), so that no pod takes it uncharged while old nodes "
    "still advertise it (docs/transitions.md). No node of the cluster advertises it any more "
    "(`status.capacity`): retire it with the command in the hint and commit the tree.",
    bad="# quotas keep requests.nvidia.com/mig-1g.10gb: \"0\"; no node's capacity lists nvidia.com/mig-1g.10gb",
    good="gpuplan build fleet.yaml --retire-resource nvidia.com/mig-1g.10gb",
)
E_QUEUE = Code(
    "GP889", "Volcano Queue not as planned", Severity.ERROR,
    "A Volcano Queue gpuplan writes (`volcano/queues.yaml`: a tenant's `gpuplan-<tenant>`, its leaf "
    "`gpuplan-<tenant>.<pool>`, a cohort's `gpuplan.<cohort>`) is not in the cluster, or its `capability`, "
    "`deserved`, `guarantee.resource`, `parent` or `affinity.nodeGroupAffinity` differs from the plan: Volcano's "
    "capacity plugin then holds the tenant's jobs to other numbers than its grants (a missing leaf takes no "
    "PodGroup at all; a leaf on another node group runs its pods on another pool), or the tree is not synced. "
    "A resource name the capability leaves out is not limited at all (volcano-sh/volcano v1.15.1 "
    "pkg/scheduler/api/resource_info.go:949-985), so an absent name counts as a difference.",
    bad="# live gpuplan-nlp.train-h100: capability nvidia.com/gpu '32'; planned '24'",
    good="# argocd app sync (or flux reconcile) the generated tree: live and planned agree",
)
CODES = (E_QUEUE, E_POLICY_MISSING, E_POLICY_UNBOUND, E_TOPOLOGY_LABEL, E_LIVE_INPUT, E_NODE_MISSING, E_NODE_LABEL, E_NODE_TAINT, E_CAPACITY, E_MIG_STATE,
         E_QUOTA_MISSING, E_QUOTA_DIFFERS, W_UNPLANNED_NODE, W_UNPLANNED_RESOURCE,
         E_DUPLICATE_KEY, E_NUMBER, E_WRONG_TYPE, I_RETIRE_CONFIG, I_RETIRE_NAMESPACE, I_RETIRE_RESOURCE)

# --- reading `--live`: every bound in one place (README "Hostile input") -------

MAX_LIVE_BYTES = 64 * 1024 * 1024  # all --live inputs together; ~ 20,000 nodes without managedFields
MAX_LIVE_DEPTH = 64  # kubectl output nests ~12 deep (managedFields' fieldsV1 the deepest)
MAX_LIVE_VALUES = 4_000_000  # items and members, all inputs together; bounds the parsed objects' memory
MAX_LIVE_ITEMS = 100_000  # objects in `items`, all inputs together: 5x the largest fleet gpuplan is benchmarked on;
# bounds verify()'s time (each node is compared with its pool) where the value limit alone would not
MAX_NUMBER_CHARS = 32  # int64 is 19 digits; a float Go prints is at most 24 characters
MAX_TYPE_ERRORS = 50  # GP882 findings listed before the rest are only counted
MAX_KEPT = 1000  # drift findings kept per severity (the reporter shows 200); the rest are counted

_HINT = "use `kubectl get nodes,resourcequotas -A -o json`"


class LiveInputError(Exception):
    def __init__(self, diag: Diagnostic, more: Iterable[Diagnostic] = ()):
        super().__init__(diag.message)
        self.diag = diag
        self.diags = [diag, *more]


def display_name(name: str) -> str:
    """A --live argument as a diagnostic's file: os.fsdecode's surrogates made visible."""
    return show(name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")) if name else name


def read_live(arg: str, budget: int = MAX_LIVE_BYTES) -> tuple[str, bytes]:
    """(display name, bytes) of one --live argument, at most ``budget`` bytes.
    A path goes through the loader's reader (regular files only: a FIFO, a
    device or a directory is refused before a byte is read); ``-`` is stdin,
    which may be a pipe, so only the cap is enforced: at most budget+1 bytes
    are read. Raises LiveInputError."""
    from gpuplan.spec import loader

    if arg != "-":
        name = display_name(arg)
        try:
            return name, loader.read_bytes(arg, display=name, max_bytes=budget)
        except loader.LoadError as exc:
            raise LiveInputError(_live_limit_hint(exc.diag, budget)) from None
    try:
        return "<stdin>", loader.read_stdin(max_bytes=budget)
    except loader.LoadError as exc:
        raise LiveInputError(_live_limit_hint(exc.diag, budget)) from None


def _too_large(name: str, budget: int) -> Diagnostic:
    from gpuplan.spec.loader import E_TOO_LARGE

    what = (f"the --live input is larger than {_mib(budget)}" if budget >= MAX_LIVE_BYTES else
            f"the --live inputs are larger than {_mib(MAX_LIVE_BYTES)} together")
    return E_TOO_LARGE.diag(what, file=name, hint=_SMALLER)


_SMALLER = ("verify fewer nodes per run: `kubectl get nodes -l gpuplan.dev/pool=POOL -o json`, "
            "and `kubectl get resourcequotas -A -o json` on its own")


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.0f} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def _live_limit_hint(d: Diagnostic, budget: int) -> Diagnostic:
    from gpuplan.spec.loader import E_TOO_LARGE

    if d.code == E_TOO_LARGE.code:  # the loader's hint speaks of specs and inventories
        return _too_large(d.file or "", budget)
    return d


# JSON text outside strings, found without a tokenizer: escapes are removed
# first (a backslash only occurs in strings), so `"[^"]*"` then matches each
# string exactly, and a failed match can only be the last, unclosed quote:
# linear time whatever the input.
_ESCAPE = re.compile(rb"\\.", re.S)
_STRING = re.compile(rb'"[^"]*"')
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET_OR_COMMA = bytes(c for c in range(256) if c not in b"[]{},")


def _shape(raw: bytes) -> tuple[bool, int]:
    """(nested deeper than MAX_LIVE_DEPTH?, values) of JSON text, in C-speed
    passes and before a Python object is made. Chosen over catching the json
    module's RecursionError: that fires at about 1,000 levels, after which the
    comparisons (``==`` on scopeSelector) and reporters could still recurse
    too deep, and it gives no limit to document."""
    s = _STRING.sub(b"", _ESCAPE.sub(b"", raw)).translate(_BRACKETS, _NOT_BRACKET_OR_COMMA)
    values = s.count(b",") + s.count(b"[") + 1  # every value but a container's first follows a comma
    s = s.replace(b",", b"")
    # each pass removes the innermost level: what survives MAX_LIVE_DEPTH passes nests deeper
    for _ in range(MAX_LIVE_DEPTH):
        t = s.replace(b"[]", b"")
        if len(t) == len(s):
            break
        s = t
    return b"[]" in s, values


class _Bad:
    """A value json could not represent faithfully, kept in place so that its
    JSON path can be reported: ``why`` says what it was."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


class _DupDict(dict):
    """An object that had a key twice (``dup``); its value is the last one."""

    __slots__ = ("dup",)


def _decode(text: str) -> tuple[Any, bool]:
    """json.loads with hooks that never raise: numbers out of range and
    objects with duplicate keys become markers; the flag says whether any
    was made (then the caller walks the document for the first one)."""
    seen_bad = False

    def number(s: str, conv: Any) -> Any:
        nonlocal seen_bad
        if len(s) > MAX_NUMBER_CHARS:
            seen_bad = True
            return _Bad(f"a number of {len(s):,} characters")
        v = conv(s)
        if isinstance(v, float) and not math.isfinite(v):
            seen_bad = True
            return _Bad(f"the number {s}, which overflows a float")
        return v

    def constant(s: str) -> _Bad:
        nonlocal seen_bad
        seen_bad = True
        return _Bad(f"`{s}`, which is not JSON")

    def pairs(items: list[tuple[str, Any]]) -> dict:
        nonlocal seen_bad
        d = dict(items)
        if len(d) != len(items):
            seen_bad = True
            keys: set[str] = set()
            dup = _DupDict(d)
            dup.dup = next(k for k, _ in items if k in keys or keys.add(k))  # type: ignore[func-returns-value]
            return dup
        return d

    data = json.loads(text, parse_int=lambda s: number(s, int), parse_float=lambda s: number(s, float),
                      parse_constant=constant, object_pairs_hook=pairs)
    return data, seen_bad


def _first_bad(data: Any) -> tuple[str, Any] | None:
    """(JSON path, marker) of the first marker, in document order. Iterative;
    depth is already bounded."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, (_Bad, _DupDict)):
            return path, v
        if isinstance(v, dict):
            stack.extend((_join(path, k), x) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in reversed(list(enumerate(v))))
    return None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _join(path: str, key: str) -> str:
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _type_name(v: Any) -> str:
    from gpuplan.diagnostics import type_name

    return type_name(v)


class _Checker:
    """Type checks of the fields verify() reads, each at its JSON path."""

    def __init__(self, name: str):
        self.name = name
        self.errors: list[Diagnostic] = []
        self.more = 0

    def bad(self, path: str, want: str, v: Any) -> None:
        if len(self.errors) >= MAX_TYPE_ERRORS:
            self.more += 1
            return
        self.errors.append(E_WRONG_TYPE.diag(
            f"{show(path)}: expected {want}, got {_type_name(v)}", file=self.name,
            hint="the field must have the type the Kubernetes API gives it; " + _HINT))

    def obj(self, parent: dict, key: str, path: str, *, optional: bool = True) -> dict | None:
        v = parent.get(key)
        if v is None and optional:
            return None
        if not isinstance(v, dict):
            self.bad(_join(path, key), "an object", v)
            return None
        return v

    def string_map(self, parent: dict, key: str, path: str, scalar: tuple[type, ...] = (str,)) -> None:
        """parent[key] is absent, null or an object whose values have the types ``scalar``."""
        m = self.obj(parent, key, path)
        if m is None:
            return
        at = _join(path, key)
        for k, v in m.items():
            if not isinstance(v, scalar) or isinstance(v, bool):
                self.bad(_join(at, k), "a string" if scalar == (str,) else "a quantity (string or integer)", v)

    def opt_str(self, parent: dict, key: str, path: str) -> None:
        v = parent.get(key)
        if v is not None and not isinstance(v, str):
            self.bad(_join(path, key), "a string", v)

    def node(self, item: dict, path: str) -> None:
        meta = item["metadata"]
        self.string_map(meta, "labels", f"{path}.metadata")
        spec = self.obj(item, "spec", path)
        if spec is not None and spec.get("taints") is not None:
            taints = spec["taints"]
            if not isinstance(taints, list):
                self.bad(f"{path}.spec.taints", "a list", taints)
            else:
                for j, t in enumerate(taints):
                    at = f"{path}.spec.taints[{j}]"
                    if not isinstance(t, dict):
                        self.bad(at, "an object", t)
                        continue
                    for k in ("key", "value", "effect"):
                        self.opt_str(t, k, at)
        status = self.obj(item, "status", path)
        if status is not None:
            for f in ("capacity", "allocatable"):
                self.string_map(status, f, f"{path}.status", (str, int))

    def binding(self, item: dict, path: str) -> None:
        spec = self.obj(item, "spec", path)
        if spec is not None:
            self.opt_str(spec, "policyName", f"{path}.spec")
            actions = spec.get("validationActions")
            if actions is not None and not (isinstance(actions, list) and all(isinstance(a, str) for a in actions)):
                self.bad(f"{path}.spec.validationActions", "a list of strings", actions)

    def queue(self, item: dict, path: str) -> None:
        spec = self.obj(item, "spec", path)
        if spec is None:
            return
        at = f"{path}.spec"
        for key in ("capability", "deserved"):
            self.string_map(spec, key, at, (str, int))
        guarantee = self.obj(spec, "guarantee", at)
        if guarantee is not None:
            self.string_map(guarantee, "resource", f"{at}.guarantee", (str, int))
        self.opt_str(spec, "parent", at)
        affinity = self.obj(spec, "affinity", at)
        groups = self.obj(affinity, "nodeGroupAffinity", f"{at}.affinity") if affinity is not None else None
        required = groups.get("requiredDuringSchedulingIgnoredDuringExecution") if groups is not None else None
        if required is not None and not (isinstance(required, list) and all(isinstance(g, str) for g in required)):
            self.bad(f"{at}.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                     "a list of strings", required)

    def quota(self, item: dict, path: str) -> None:
        spec = self.obj(item, "spec", path)
        if spec is not None:
            self.string_map(spec, "hard", f"{path}.spec", (str, int))
            self.obj(spec, "scopeSelector", f"{path}.spec")


@dataclass
class Live:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    quotas: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    bindings: dict[str, dict[str, Any]] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # Volcano Queues by name
    saw_namespaces: bool = False
    saw_queues: bool = False
    saw_nodes: bool = False
    saw_quotas: bool = False
    saw_admission: bool = False
    values: int = 0  # counted over all inputs, against MAX_LIVE_VALUES
    items: int = 0  # likewise, against MAX_LIVE_ITEMS


def parse_live(texts: Iterable[tuple[str, str | bytes]], live: Live | None = None) -> Live:
    """(display name, JSON text) of each input -> the objects verify-cluster
    compares. Raises LiveInputError: the input is refused whole, since a
    partial read could make a drifted cluster look as planned. ``texts`` may
    be lazy, so only one input's text is held at a time."""
    live = live or Live()
    for name, text in texts:
        _parse_one(live, name, text)
    return live


def _parse_one(live: Live, name: str, text: str | bytes) -> None:
    from gpuplan.spec.loader import E_BINARY, E_TOO_DEEP, E_TOO_MANY_VALUES

    def bad(msg: str) -> LiveInputError:
        return LiveInputError(E_LIVE_INPUT.diag(msg, file=name, hint=_HINT))

    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    too_deep, values = _shape(raw)
    if too_deep:
        raise LiveInputError(E_TOO_DEEP.diag(f"objects and lists nest deeper than {MAX_LIVE_DEPTH} levels",
                                             file=name, hint=_HINT))
    live.values += values
    if live.values > MAX_LIVE_VALUES:
        raise LiveInputError(E_TOO_MANY_VALUES.diag(
            f"the --live input holds more than {MAX_LIVE_VALUES:,} values (items and members, all --live "
            "inputs together)", file=name, hint=_SMALLER))
    if isinstance(text, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise LiveInputError(E_BINARY.diag(
                f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", file=name, line=line,
                col=exc.start - raw.rfind(b"\n", 0, exc.start), hint="kubectl prints UTF-8 JSON")) from None
    del raw
    try:
        data, marked = _decode(text)
    except json.JSONDecodeError as exc:
        raise LiveInputError(E_LIVE_INPUT.diag(f"not JSON: {exc.msg}", file=name, line=exc.lineno,
                                               col=exc.colno, hint="use `kubectl ... -o json`")) from None
    except RecursionError:  # unreachable after _shape; kept so a miss is exit 1, not 4
        raise LiveInputError(E_TOO_DEEP.diag("objects and lists nest too deep", file=name, hint=_HINT)) from None
    del text
    if marked:
        found = _first_bad(data)
        if found is not None:
            path, m = found
            if isinstance(m, _DupDict):
                raise LiveInputError(E_DUPLICATE_KEY.diag(
                    f"{show(_join(path, m.dup))}: the key {show(json.dumps(m.dup))} appears more than once "
                    f"in {show(path) or 'the top-level object'}", file=name, hint=_HINT))
            raise LiveInputError(E_NUMBER.diag(f"{show(path) or 'the document'}: {show(m.why)}", file=name,
                                               hint=_HINT))
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise bad("expected a Kubernetes List with `items`")
    live.items += len(data["items"])
    if live.items > MAX_LIVE_ITEMS:
        raise LiveInputError(E_TOO_MANY_VALUES.diag(
            f"the --live input holds more than {MAX_LIVE_ITEMS:,} objects in `items` (all --live inputs "
            "together)", file=name, hint=_SMALLER))
    list_kind = data.get("kind")
    check = _Checker(name)
    if list_kind is not None and not isinstance(list_kind, str):
        check.bad("kind", "a string", list_kind)
        list_kind = None
    accepted: list[tuple[str, dict]] = []
    for i, item in enumerate(data["items"]):
        path = f"items[{i}]"
        if not isinstance(item, dict):
            check.bad(path, "a Kubernetes object", item)
            continue
        meta = check.obj(item, "metadata", path, optional=False)
        if meta is None:
            continue
        if not isinstance(meta.get("name"), str):
            check.bad(f"{path}.metadata.name", "a string", meta.get("name"))
            continue
        check.opt_str(meta, "namespace", f"{path}.metadata")
        kind = item.get("kind")
        if kind is not None and not isinstance(kind, str):
            check.bad(f"{path}.kind", "a string", kind)
            continue
        kind = kind or (list_kind or "").removesuffix("List")
        if kind == "Node":
            check.node(item, path)
        elif kind == "ResourceQuota":
            check.quota(item, path)
        elif kind == "ValidatingAdmissionPolicyBinding":
            check.binding(item, path)
        elif kind == "Queue" and _group(item) == VOLCANO_GROUP:
            check.queue(item, path)
        accepted.append((kind, item))
    if check.errors:
        more = []
        if check.more:
            more.append(E_WRONG_TYPE.diag(f"{check.more:,} more fields of the wrong type not listed",
                                          file=name, hint=_HINT))
        raise LiveInputError(check.errors[0], [*check.errors[1:], *more])
    for kind, item in accepted:
        meta = item["metadata"]
        if kind == "Node":
            live.saw_nodes = True
            live.nodes[meta["name"]] = item
        elif kind == "ResourceQuota":
            live.saw_quotas = True
            live.quotas[(meta.get("namespace") or "", meta["name"])] = item
        elif kind == "ValidatingAdmissionPolicy":
            live.saw_admission = True
            live.policies[meta["name"]] = item
        elif kind == "ValidatingAdmissionPolicyBinding":
            live.saw_admission = True
            live.bindings[meta["name"]] = item
        elif kind == "Namespace":
            live.saw_namespaces = True
            live.namespaces.add(meta["name"])
        elif kind == "Queue" and _group(item) == VOLCANO_GROUP:
            live.saw_queues = True
            live.queues[meta["name"]] = item
    if list_kind in ("ValidatingAdmissionPolicyList", "ValidatingAdmissionPolicyBindingList"):
        live.saw_admission = True
    if list_kind == "NodeList":
        live.saw_nodes = True
    if list_kind == "ResourceQuotaList":
        live.saw_quotas = True
    if list_kind == "NamespaceList":
        live.saw_namespaces = True
    if list_kind == "QueueList" and _group(data) == VOLCANO_GROUP:
        live.saw_queues = True


VOLCANO_GROUP = "scheduling.volcano.sh"  # gpuplan.queueing.volcano.lower.API's group


def _group(item: dict) -> str | None:
    api = item.get("apiVersion")
    return api.rpartition("/")[0] if isinstance(api, str) else None


_QUANTITY = re.compile(r"([0-9]{1,30})(k|M|G|Ki|Mi)?\Z")
_MULT = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20}


def _int(q: Any) -> int | None:
    """An extended-resource quantity (always an integer) as int; None when it
    is not one. ASCII digits only, and few enough that int() cannot refuse them."""
    if isinstance(q, int) and not isinstance(q, bool):
        return q
    if not isinstance(q, str):
        return None
    m = _QUANTITY.match(q)
    return int(m.group(1)) * _MULT[m.group(2)] if m else None


@dataclass
class PoolResult:
    pool: str
    planned: int | None  # static: nodes listed; Karpenter: None (autoscaled)
    found: list[str] = field(default_factory=list)
    ok: list[str] = field(default_factory=list)


@dataclass
class Verified:
    diagnostics: list[Diagnostic]
    pools: list[PoolResult]


def _pool_of(node: dict[str, Any]) -> str | None:
    labels = node["metadata"].get("labels") or {}
    from gpuplan.identity import POOL_LABEL

    return labels.get(POOL_LABEL) or labels.get(KARPENTER_NODEPOOL_LABEL)


def _planned_taints(pv: PoolView) -> list[dict[str, str]]:
    """The taints gpuplan puts on the pool's nodes (not those a platform may add: GKE taints GPU
    nodes only in clusters that also have non-GPU pools)."""
    from gpuplan.identity import pool_node_taints
    from gpuplan.provisioning.pools import platform_taints

    theirs = platform_taints(pv)
    return [t for t in pool_node_taints(pv) if t not in theirs]


def _kept_names(rf: ResolvedFleet, pv: PoolView) -> dict[str, set[str]]:
    """label -> the old config names of this pool the generated tree still keeps for nodes that
    carry them (identity.kept_plugin_configs / kept_mig_configs; empty without a previous tree)."""
    from gpuplan.identity import (
        DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, kept_mig_configs, kept_plugin_configs,
    )

    if rf.previous is None:
        return {}
    return {DEVICE_PLUGIN_CONFIG_LABEL: {n for n, (p, _) in kept_plugin_configs(rf).items() if p == pv.name},
            MIG_CONFIG_LABEL: {n for n, (p, _) in kept_mig_configs(rf).items() if p == pv.name}}


def _check_node(rf: ResolvedFleet, pv: PoolView, node: dict[str, Any]) -> list[Diagnostic]:
    from gpuplan.identity import pool_node_labels

    raw_name = node["metadata"]["name"]
    name = show(raw_name)  # every value from the input goes through show(): it may be hostile
    path = pv.path
    out: list[Diagnostic] = []
    labels = node["metadata"].get("labels") or {}
    kept = _kept_names(rf, pv)
    from gpuplan.provisioning.pools import platform_gpu_stack, platform_labels

    # gpuplan's labels, and those the platform sets itself (GKE: node pool, accelerator, partition size)
    for key, value in {**pool_node_labels(rf, pv), **platform_labels(pv)}.items():
        if labels.get(key) in kept.get(key, ()):
            continue  # a node made or labelled under an old config name the tree keeps (docs/transitions.md)
        if labels.get(key) != value:
            have = f"has {key}={show(labels[key])}" if key in labels else f"has no {key}"
            out.append(rf.diag(E_NODE_LABEL, f"node {name} (pool {pv.name}) {have}; planned {key}={value}",
                               path, key=True, hint="check the pool's NodeFeatureRule / NodePool is synced "
                               "and nfd-master runs"))
    taints = (node.get("spec") or {}).get("taints") or []
    for t in _planned_taints(pv):
        if not any(x.get("key") == t["key"] and x.get("effect") == t["effect"]
                   and ("value" not in t or x.get("value") == t["value"]) for x in taints):
            text = f"{t['key']}{'=' + t['value'] if 'value' in t else ''}:{t['effect']}"
            out.append(rf.diag(E_NODE_TAINT, f"node {name} (pool {pv.name}) lacks taint {text}", path, key=True,
                               hint=_taint_hint(raw_name, text)))
    status = node.get("status") or {}
    planned = pv.node_resources()
    for field_name in ("capacity", "allocatable"):
        have = status.get(field_name) or {}
        for res, count in planned.items():
            got = _int(have.get(res, 0))
            if got != count:
                out.append(rf.diag(E_CAPACITY, f"node {name} (pool {pv.name}) {field_name} {res}: "
                                   f"{show(have.get(res, 'absent'))}, planned {count}", path, key=True,
                                   hint="check the node's device-plugin and MIG labels, and the device plugin pod"))
        if field_name == "capacity":
            for res, q in sorted(have.items()):
                if res.startswith("nvidia.com/") and res not in planned and (_int(q) or 0) > 0:
                    out.append(rf.diag(W_UNPLANNED_RESOURCE, f"node {name} (pool {pv.name}) advertises "
                                       f"{show(res)}: {show(q)}, which the pool does not plan", path, key=True))
    if pv.pool.sharing.mode == "mig" and not platform_gpu_stack(pv.pool):  # no mig-manager under GKE's MIG
        state = labels.get(MIG_STATE_LABEL)
        if state != "success":
            sev = Severity.ERROR if state == "failed" else Severity.WARNING
            out.append(rf.diag(E_MIG_STATE, f"node {name} (pool {pv.name}) {MIG_STATE_LABEL}="
                               f"{show(state) if state is not None else '(absent)'}; planned layout "
                               f"{mig_config_name(pv)} is not applied", ("spec", "pools", pv.index, "sharing"),
                               key=True, severity=sev,
                               hint="see the nvidia-mig-manager pod's log on that node"))
    return out


def _check_quotas(rf: ResolvedFleet, live: Live, planned: list[dict[str, Any]]) -> list[Diagnostic]:
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for q in planned:
        by_ns.setdefault(q["metadata"]["namespace"], []).append(q)
    out = []
    for ti, tenant in enumerate(rf.fleet.spec.tenants):
        for ni, ns in enumerate(tenant.namespaces):
            path = (("spec", "tenants", ti, "quotas", ns) if ns in tenant.quotas
                    else ("spec", "tenants", ti, "namespaces", ni))
            for q in by_ns.get(ns, ()):
                qname = q["metadata"]["name"]
                got = live.quotas.get((ns, qname))
                if got is None:
                    out.append(rf.diag(E_QUOTA_MISSING, f"ResourceQuota {ns}/{qname} is not in the cluster",
                                       path, key=True, hint="sync the generated tree"))
                    continue
                spec = got.get("spec") or {}
                want_hard = {k: _int(v) for k, v in q["spec"]["hard"].items()}
                have_hard = {k: _int(v) for k, v in (spec.get("hard") or {}).items()}
                if want_hard != have_hard:
                    diff = ", ".join(f"{show(k)}: {show((spec.get('hard') or {}).get(k, 'absent'))} (planned "
                                     f"{q['spec']['hard'].get(k, 'absent')})"
                                     for k in sorted(set(want_hard) | set(have_hard))
                                     if want_hard.get(k) != have_hard.get(k))
                    out.append(rf.diag(E_QUOTA_DIFFERS, f"ResourceQuota {ns}/{qname} hard differs: {diff}",
                                       path, key=True))
                if (spec.get("scopeSelector") or None) != q["spec"].get("scopeSelector"):
                    out.append(rf.diag(E_QUOTA_DIFFERS, f"ResourceQuota {ns}/{qname} scopeSelector differs "
                                       "from the plan", path, key=True))
    return out


def _taint_hint(name: str, taint: str) -> str:
    # pasted into a shell: only a name the API server would accept, quoted all the same
    if is_dns_subdomain(name):
        return f"kubectl taint node {shlex.quote(name)} {shlex.quote(taint)}"
    return (f"taint the node with `kubectl taint node NAME {shlex.quote(taint)}` (its name in the input "
            "is not a valid node name, so no command is given)")




class _Kept:
    """Drift findings, at most MAX_KEPT per severity; the rest only counted.
    A hostile input of 800,000 one-line nodes would otherwise make millions of
    diagnostics. Keeping some of each severity keeps the exit code right."""

    def __init__(self) -> None:
        self.kept: list[Diagnostic] = []
        self.count: dict[Severity, int] = {}

    def add(self, *diags: Diagnostic) -> None:
        for d in diags:
            n = self.count[d.severity] = self.count.get(d.severity, 0) + 1
            if n <= MAX_KEPT:
                self.kept.append(d)

    def done(self) -> list[Diagnostic]:
        from gpuplan.codes import E_MORE

        errors, warnings = (max(0, self.count.get(s, 0) - MAX_KEPT) for s in (Severity.ERROR, Severity.WARNING))
        if errors or warnings:
            self.kept.append(E_MORE.diag(f"{errors + warnings:,} more differences not listed ({errors:,} errors, "
                                         f"{warnings:,} warnings)", hint="fix the ones shown and run again"))
        return self.kept


def verify(rf: ResolvedFleet, live: Live, quotas: list[dict[str, Any]],
           planned: list[dict[str, Any]] = ()) -> Verified:
    """``quotas``: the ResourceQuota objects the plan writes; ``planned``: its admission
    policies and bindings and its Kueue Topology and ResourceFlavors (the driver lowers
    them: ``gpuplan.compiler.planned_objects``), compared with the live ones."""
    diags = _Kept()
    results = []
    claimed: dict[str, list[str]] = {}
    for name, node in live.nodes.items():
        pool = _pool_of(node)
        if pool is not None:
            claimed.setdefault(pool, []).append(name)
    for pv in rf.pools:
        res = PoolResult(pv.name, len(pv.pool.nodes) if pv.pool.nodes is not None else None)
        if pv.pool.nodes is not None:
            names = []
            for j, n in enumerate(pv.pool.nodes):
                if n in live.nodes:
                    names.append(n)
                elif live.saw_nodes:
                    diags.add(rf.diag(E_NODE_MISSING, f"node {n} of pool {pv.name} is not in the cluster",
                                      ("spec", "pools", pv.index, "nodes", j)))
            for n in sorted(set(claimed.get(pv.name, ())) - set(pv.pool.nodes)):
                diags.add(rf.diag(W_UNPLANNED_NODE, f"node {show(n)} is labelled for pool {pv.name}, which does "
                                  "not list it", ("spec", "pools", pv.index, "nodes"), key=True))
        else:
            names = sorted(claimed.get(pv.name, ()))
        for n in names:
            found = _check_node(rf, pv, live.nodes[n])
            diags.add(*found)
            res.found.append(n)
            if not any(d.is_error for d in found):
                res.ok.append(n)
        results.append(res)
    for pool in sorted(set(claimed) - set(rf.pool_by_name)):
        for n in sorted(claimed[pool]):
            diags.add(rf.diag(W_UNPLANNED_NODE, f"node {show(n)} is labelled for pool {show(pool)}, which the spec "
                              "does not have", ("spec", "pools"), key=True))
    if live.saw_quotas:
        diags.add(*_check_quotas(rf, live, quotas))
    if live.saw_admission:
        diags.add(*_check_admission(rf, live, planned))
    if live.saw_nodes:
        diags.add(*_check_topology(rf, live, planned))
    if live.saw_queues:
        diags.add(*_check_queues(rf, live, planned))
    diags.add(*_retirable(rf, live))
    return Verified(diags.done(), results)


def _retirable(rf: ResolvedFleet, live: Live) -> list[Diagnostic]:
    """Kept config names no live node carries (GP886), kept namespaces the cluster no
    longer has (GP887) and kept GPU resource names no live node advertises (GP888), each with the
    command that retires it. Only what the input shows: names when it holds nodes, namespaces when
    it holds Namespaces."""
    from gpuplan.identity import (
        DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, kept_gpu_resources, kept_mig_configs, kept_plugin_configs,
    )

    prev = rf.previous
    if prev is None:
        return []
    out = []
    if live.saw_nodes:
        carried: dict[str, set[Any]] = {DEVICE_PLUGIN_CONFIG_LABEL: set(), MIG_CONFIG_LABEL: set()}
        for node in live.nodes.values():
            labels = node["metadata"].get("labels") or {}
            for label, names in carried.items():
                names.add(labels.get(label))
        for label, kept in ((DEVICE_PLUGIN_CONFIG_LABEL, kept_plugin_configs(rf)),
                            (MIG_CONFIG_LABEL, kept_mig_configs(rf))):
            for name, (pool, _) in sorted(kept.items()):
                if name in carried[label]:
                    continue
                pv = rf.pool_by_name[pool]
                out.append(rf.diag(I_RETIRE_CONFIG, f"the tree keeps {label}={name} for pool {pool}'s old nodes, and "
                                   "no node carries it any more", pv.path, key=True,
                                   hint=f"gpuplan build {shlex.quote(rf.file)} --retire-config {name}"))
        advertised = {r for node in live.nodes.values()
                      for r, q in ((node.get("status") or {}).get("capacity") or {}).items() if str(q) not in ("0", "")}
        for name in kept_gpu_resources(rf):
            if name not in advertised:
                out.append(rf.diag(I_RETIRE_RESOURCE, f"the namespaces' quotas keep {name} at 0 (the spec no longer "
                                   "advertises it), and no node advertises it any more", ("spec", "pools"), key=True,
                                   hint=f"gpuplan build {shlex.quote(rf.file)} --retire-resource {name}"))
    if live.saw_namespaces:
        for ns in sorted(getattr(prev, "kept_namespaces", ())):
            if ns not in live.namespaces:
                out.append(rf.diag(I_RETIRE_NAMESPACE, f"the AppProject keeps namespace {ns} (it left the spec), and "
                                   "the cluster no longer has it", ("spec", "tenants"), key=True,
                                   hint=f"gpuplan build {shlex.quote(rf.file)} --retire-namespace {ns}"))
    return out


def _check_admission(rf: ResolvedFleet, live: Live, planned: Iterable[dict[str, Any]]) -> list[Diagnostic]:
    out = []
    at = ("spec", "tiers")  # the policies exist because of the tiers
    for obj in planned:
        kind, name = obj.get("kind"), obj["metadata"]["name"]
        if kind == "ValidatingAdmissionPolicy" and name not in live.policies:
            out.append(rf.diag(E_POLICY_MISSING, f"ValidatingAdmissionPolicy {name} is not in the cluster", at,
                               key=True, hint="sync the generated tree (cluster/admission-policy.yaml)"))
        elif kind == "ValidatingAdmissionPolicyBinding":
            got = live.bindings.get(name)
            if got is None:
                out.append(rf.diag(E_POLICY_MISSING, f"ValidatingAdmissionPolicyBinding {name} is not in the "
                                   "cluster: its policy enforces nothing", at, key=True,
                                   hint="sync the generated tree (cluster/admission-policy.yaml)"))
                continue
            want, have = obj["spec"], got.get("spec") or {}
            if (have.get("policyName"), have.get("validationActions")) != (want.get("policyName"),
                                                                            want.get("validationActions")):
                out.append(rf.diag(E_POLICY_UNBOUND, f"ValidatingAdmissionPolicyBinding {name} binds "
                                   f"{show(have.get('policyName'))} with {show(have.get('validationActions'))}, "
                                   f"planned {want.get('policyName')} with {want.get('validationActions')}",
                                   at, key=True))
    return out


def _check_topology(rf: ResolvedFleet, live: Live, planned: Iterable[dict[str, Any]]) -> list[Diagnostic]:
    planned = list(planned)
    levels = {o["metadata"]["name"]: [lv["nodeLabel"] for lv in o["spec"]["levels"]]
              for o in planned if o.get("kind") == "Topology"}
    out = []
    at = ("spec", "queueing", "topologyLevels")
    for flavor in (o for o in planned if o.get("kind") == "ResourceFlavor"):
        want = levels.get(flavor["spec"].get("topologyName") or "")
        if not want:
            continue
        selector = flavor["spec"].get("nodeLabels") or {}
        for name in sorted(live.nodes):
            labels = live.nodes[name]["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                continue
            missing = [lv for lv in want if lv not in labels]
            if missing:
                out.append(rf.diag(E_TOPOLOGY_LABEL, f"node {show(name)} of flavor {flavor['metadata']['name']} "
                                   f"lacks the topology label{'s' if len(missing) > 1 else ''} "
                                   f"{', '.join(missing)}: Kueue admits nothing to its GPUs", at, key=True,
                                   hint="label the node for every topology level (or its NodePool template)"))
    return out


def _queue_view(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Queue's spec the plan decides, as numbers: capability, deserved,
    guarantee.resource (name -> units), parent, the required node groups."""
    def units(m: Any) -> dict[str, Any]:
        return {k: _int(v) if _int(v) is not None else v for k, v in (m or {}).items()} if isinstance(m, dict) else {}

    affinity = ((spec.get("affinity") or {}).get("nodeGroupAffinity") or {}) if isinstance(spec.get("affinity"), dict) \
        else {}
    return {"capability": units(spec.get("capability")), "deserved": units(spec.get("deserved")),
            "guarantee": units((spec.get("guarantee") or {}).get("resource") if isinstance(spec.get("guarantee"), dict)
                               else None),
            "parent": spec.get("parent") or None,
            "nodeGroupAffinity": sorted(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])}


def _check_queues(rf: ResolvedFleet, live: Live, planned: Iterable[dict[str, Any]]) -> list[Diagnostic]:
    """The Volcano Queues of the plan against the live ones (GP889): each missing, and each field
    of capability, deserved, guarantee, parent and node-group affinity that differs. Only with Queues
    in the input (``kubectl get queues.scheduling.volcano.sh -o json``)."""
    from gpuplan.identity import TENANT_LABEL

    tenant_index = {t.name: i for i, t in enumerate(rf.fleet.spec.tenants)}
    out = []
    for obj in planned:
        if obj.get("kind") != "Queue" or _group(obj) != VOLCANO_GROUP:
            continue
        name = obj["metadata"]["name"]
        tenant = (obj["metadata"].get("labels") or {}).get(TENANT_LABEL)
        at = ("spec", "tenants", tenant_index[tenant]) if tenant in tenant_index else ("spec", "queueing")
        got = live.queues.get(name)
        want = _queue_view(obj["spec"])
        if got is None:
            what = "a leaf: the PodGroups that name it are not scheduled" if want["nodeGroupAffinity"] else \
                "the parent of planned queues: Volcano's webhook refuses them"
            out.append(rf.diag(E_QUEUE, f"Volcano Queue {name} is not in the cluster ({what})", at, key=True,
                               hint="sync the generated tree (volcano/queues.yaml)"))
            continue
        have = _queue_view(got.get("spec") or {})
        for key in ("capability", "deserved", "guarantee"):
            w, h = want[key], have[key]
            diff = ", ".join(f"{show(r)}: {show(h.get(r, 'absent'))} (planned {w.get(r, 'absent')})"
                             for r in sorted(set(w) | set(h)) if w.get(r) != h.get(r))
            if diff:
                out.append(rf.diag(E_QUEUE, f"Volcano Queue {name} {key} differs: {diff}", at, key=True,
                                   hint="sync the generated tree (volcano/queues.yaml); an edit by hand is undone"))
        for key in ("parent", "nodeGroupAffinity"):
            if want[key] != have[key]:
                def text(v: Any) -> str:
                    return (", ".join(map(str, v)) if isinstance(v, list) else str(v)) if v else "none"

                out.append(rf.diag(E_QUEUE, f"Volcano Queue {name} {key} {show(text(have[key]))}, planned "
                                   f"{text(want[key])}", at, key=True, hint="sync the generated tree (volcano/queues.yaml)"))
    return out
