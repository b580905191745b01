"""Helpers for rule tests: a small valid fleet, edited by string replacement,
written to tmp_path and checked with the real pipeline (check_fleet)."""

from __future__ import annotations

# ``health: {nodesDown: 0}``: the train and infer pools are granted in full (GP434 otherwise)
BASE = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: small}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops:
      repoURL: https://git.example.com/fleet.git
  pools:
    - name: train
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [n1, n2]
      sharing: {mode: exclusive}
      health:
        nodesDown: 0
      pricePerGPUHour: 2.0
    - name: infer
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [n3]
      sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}
      health:
        nodesDown: 0
      pricePerGPUHour: 2.0
    - name: dev
      gpu: A100-SXM4-80GB
      gpusPerNode: 4
      nodes: [n4]
      sharing: {mode: time-slicing, replicas: 4}
      pricePerGPUHour: 2.0
  tiers:
    - {name: training, pool: train, workload: training, priority: 1000}
    - {name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000}
    - {name: notebooks, pool: dev, workload: interactive, priority: 10, preemption: Never}
  tenants:
    - name: alpha
      namespaces: [alpha-ns]
      quotas:
        alpha-ns: {training: 8, serve: 8, notebooks: 16}
"""


def position(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """1-based (line, col) of the first occurrence of ``needle`` (plus ``offset`` characters)."""
    i = text.index(needle) + offset
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, col


def check_text(tmp_path, text: str):
    """``text`` written to ``tmp_path/fleet.yaml`` and checked (``check_fleet``)."""
    from gpuplan.compiler import check_fleet

    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    return check_fleet(p)


def with_code(checked, code: str) -> list:
    """The diagnostics of ``checked`` with ``code``."""
    return [d for d in checked.diagnostics if d.code == code]


def errors(checked) -> list:
    return [d for d in checked.diagnostics if d.is_error]


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


class Run:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.n = 0

    def checked(self, text: str):
        from gpuplan.compiler import check_fleet

        self.n += 1
        path = self.tmp_path / f"fleet{self.n}.yaml"
        path.write_text(text, encoding="utf-8")
        checked = check_fleet(path)
        assert checked.resolved is not None, checked.diagnostics
        return checked

    def __call__(self, text: str):
        return self.checked(text).diagnostics

    def resolved(self, text: str):
        return self.checked(text).resolved

    def codes(self, text: str, prefix: str = "") -> list[str]:
        return [d.code for d in self(text) if d.code.startswith(prefix)]


def only(diags, code):
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, f"expected one {code}, got {[(d.code, d.message) for d in diags]}"
    return found[0]
