"""The pipeline's shape, read from the imports (docs/architecture.md): every module
belongs to one stage, imports only its own stage or earlier ones, and no modules
import each other in a circle. Lazy imports count (they are imports all the same);
imports under ``if TYPE_CHECKING:`` do not (they never run).

Written on the standard library's ``ast``: the rule is 40 lines, the stage table is
the architecture document's, and a failure names the import to remove."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

ROOT = REPO / "gpuplan"

# Stages in pipeline order (docs/architecture.md). A module is in the stage of the
# longest prefix that names it; anything unlisted fails the test, so a new module
# must be placed.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # facts and engines every stage may use: diagnostics and codes (the registry behind
    # `gpuplan explain` imports its modules by name, only when asked), the hardware and cloud
    # catalogs, the MIG geometry engine, the pinned upstream APIs and the one CEL engine
    ("foundation", ("gpuplan", "gpuplan.artifacts", "gpuplan.diagnostics", "gpuplan.codes", "gpuplan.exitcodes", "gpuplan.internal",
                    "gpuplan.k8sversions", "gpuplan.k8s_features_dra", "gpuplan.upstream", "gpuplan.upstream.crdread", "gpuplan.catalog",
                    "gpuplan.cloud", "gpuplan.cloud.karpenter_requirements", "gpuplan.mig", "gpuplan.render", "gpuplan.probe._nvml_compat",
                    "gpuplan.verify.cel", "gpuplan.k8snames", "gpuplan.k8squantity", "gpuplan.nodefacts",
                    "gpuplan.queueing")),
    ("load", ("gpuplan.spec.loader", "gpuplan.verify.manifests")),
    ("model", ("gpuplan.spec", "gpuplan.probe.inventory", "gpuplan.probe.codes", "gpuplan.probe.reader",
               "gpuplan.probe.paths", "gpuplan.probe.facts", "gpuplan.mig.migparted")),
    ("resolve", ("gpuplan.resolve", "gpuplan.units", "gpuplan.pergpu", "gpuplan.queues", "gpuplan.capacity", "gpuplan.identity",
                 "gpuplan.dra", "gpuplan.provisioning", "gpuplan.queueing.volcano.queues")),
    ("check", ("gpuplan.rules", "gpuplan.queueing.volcano.rules")),
    ("lower", ("gpuplan.lower", "gpuplan.queueing.volcano.lower", "gpuplan.queueing.volcano.admission",
               "gpuplan.queueing.volcano.pages", "gpuplan.queueing.volcano.podrules")),
    ("check-objects", ("gpuplan.placement", "gpuplan.verify", "gpuplan.objchecks", "gpuplan.queueing.volcano.boundary")),
    ("write", ("gpuplan.output",)),
    ("report", ("gpuplan.report", "gpuplan.drift", "gpuplan.probe")),
    ("driver", ("gpuplan.compiler", "gpuplan.kept", "gpuplan.reporters", "gpuplan.pr_report", "gpuplan.cli", "gpuplan.__main__",
                "gpuplan.importer", "gpuplan.importer.gfd", "gpuplan.importer.sharing_read", "gpuplan.importer.platforms",
                "gpuplan.importer.standalone", "gpuplan.importer.draft", "gpuplan.importer.nodegroups",
                "gpuplan.importer.gke_read", "gpuplan.importer.aks_read", "gpuplan.importer.capi_read",
                "gpuplan.importer.nap_read", "gpuplan.importer.kueue_compare", "gpuplan.importer.volcano_read")),
)
# The pipeline's driver may import lowering targets; nothing else outside lower/ may.
MAY_IMPORT_LOWER = ("gpuplan.lower", "gpuplan.compiler", "gpuplan.kept", "gpuplan.codes", "gpuplan.cli",
                    "gpuplan.queueing.volcano.lower", "gpuplan.queueing.volcano.admission")


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        name = ".".join(p.relative_to(REPO).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """gpuplan modules ``name`` imports, wherever in the file (TYPE_CHECKING blocks aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {o for n in found if n.startswith("gpuplan") and (o := _owner(n)) and o != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def stage(name: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(STAGES):
        for p in prefixes:
            # "gpuplan" itself is the package's version only: it names no subtree
            if (name == p or (p != "gpuplan" and name.startswith(p + "."))) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{name} is in no stage: add it to STAGES (and docs/architecture.md)"
    return rank


def test_every_module_has_a_stage():
    for name in MODULES:
        stage(name)


def test_no_module_imports_a_later_stage():
    upward = sorted(f"{a} ({STAGES[stage(a)][0]}) imports {b} ({STAGES[stage(b)][0]})"
                    for a, targets in GRAPH.items() for b in targets if stage(b) > stage(a))
    assert not upward, "\n".join(upward)


def test_only_the_driver_imports_lowering_targets():
    reaching = sorted(f"{a} imports {b}" for a, targets in GRAPH.items() for b in targets
                      if b.startswith("gpuplan.lower") and not any(a == p or a.startswith(p + ".")
                                                                   for p in MAY_IMPORT_LOWER))
    assert not reaching, "\n".join(reaching)


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(GRAPH):
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_circles():
    circles = _circles()
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("graph,expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_circle_finder_finds_circles(monkeypatch, graph, expected):
    monkeypatch.setattr(__import__(__name__, fromlist=["GRAPH"]), "GRAPH", graph)
    assert _circles() == expected


@pytest.mark.slow
def test_each_module_says_its_stage():
    """Module docstrings name the stage the table puts them in (a reader's first clue)."""
    wrong = []
    for name, path in sorted(MODULES.items()):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        want = f"Stage: {STAGES[stage(name)][0]} "
        if want not in doc:
            wrong.append(f"{name}: docstring lacks {want!r}")
    assert not wrong, "\n".join(wrong)


def _defines(node: ast.stmt) -> bool:
    """Whether a top-level statement of an ``__init__`` does more than document or re-export."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return False
    if isinstance(node, ast.ImportFrom):
        return False
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id in ("__all__", "__version__")
                                            for t in node.targets):
        return False
    return True


def test_package_inits_define_nothing():
    """Code lives in named modules: a package's ``__init__`` holds its docstring and at most
    re-exports, so no logic hides where a reader does not look."""
    found = sorted(f"{path.relative_to(REPO)}:{node.lineno}" for path in ROOT.rglob("__init__.py")
                   for node in ast.parse(path.read_text(encoding="utf-8")).body if _defines(node))
    assert not found, "move these into a module of the package:\n" + "\n".join(found)
