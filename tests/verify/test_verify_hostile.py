"""A tree from a pull request is hostile input: `gpuplan verify` (and `build`
reading the committed tree) ends every case below in a diagnostic, in bounded
time (subprocess timeouts, guards only) and memory (RLIMIT_AS), never a hang,
an exit 4 or a file outside the tree read."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO

MEMORY = 2 * 1024 ** 3

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  disruption:
    consolidateAfter: 30s
    budgets:
      - nodes: "10%"
        duration: 1h
        schedule: SCHEDULE
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
      requirements:
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gt, values: ["0"]}
"""

EC2NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: gpu}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-ml
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: ml}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: ml}}]
  kubelet:
    evictionSoft: SOFT
    evictionSoftGracePeriod: GRACE
"""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(*args: str, cwd: Path, timeout: float = 120, code: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUTF8": "1"}
    env.pop("NO_COLOR", None)
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "gpuplan", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit)


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def clean(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.returncode, r.stderr)


# --- reading ----------------------------------------------------------------------------------


def test_a_fifo_in_the_tree_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    write(tmp_path / "ok.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert re.search(r"pipe\.yaml: error\[GP830\]: .*FIFO", r.stderr), r.stderr


def test_a_link_to_dev_zero_is_never_opened(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert "zero.yaml: error[GP845]" in r.stderr


def test_dev_zero_named_on_the_command_line_is_refused(tmp_path):
    r = run("verify", "/dev/zero", cwd=tmp_path, timeout=60)
    clean(r)
    assert "error[GP830]" in r.stderr


@pytest.mark.slow
def test_a_link_out_of_the_tree_is_refused_and_its_lines_never_quoted(tmp_path):
    secret = write(tmp_path / "outside" / "secret.yaml", "kind: [\npassword: hunter2-SECRET-LINE\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(secret, tree / "leak.yaml")
    os.symlink(tmp_path / "outside", tree / "linked-dir")
    for fmt in ("text", "json", "sarif", "github"):
        r = run("verify", "--format", fmt, "tree", cwd=tmp_path, timeout=60)
        clean(r)
        assert "SECRET-LINE" not in r.stdout + r.stderr
        assert "GP845" in r.stdout + r.stderr
    r = run("verify", "tree", cwd=tmp_path, timeout=60)
    assert "tree/leak.yaml: error[GP845]" in r.stderr and "tree/linked-dir: error[GP845]" in r.stderr


def test_a_link_inside_the_tree_is_read(tmp_path):
    write(tmp_path / "real" / "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    os.symlink("real/ns.yaml", tmp_path / "alias.yaml")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "2 objects in 2 files" in r.stderr


def test_a_sparse_6_gib_file_reads_only_the_cap(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"")
    os.truncate(big, 6 * 1024 ** 3)
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert "big.yaml:1:1: error[GP830]" in r.stderr


def test_a_5000_digit_integer_is_a_diagnostic(tmp_path):
    write(tmp_path / "int.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: " + "9" * 5000 + "\n")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert "int.yaml:4:4: error[GP830]" in r.stderr


def test_an_object_over_3_mib_is_refused(tmp_path):
    blob = "x" * (3 * 1024 * 1024 + 10)
    write(tmp_path / "cm.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"
                                f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b}}\ndata: {{blob: {blob}}}\n")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert "cm.yaml:5:1: error[GP844]" in r.stderr


def test_an_object_over_3_mib_through_aliases_is_refused_without_expanding_it(tmp_path):
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: b}", "a0: &a0 " + "y" * 100_000]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    write(tmp_path / "cm.yaml", "\n".join(lines) + "\n")
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert "cm.yaml:1:1: error[GP844]" in r.stderr


# --- schema patterns with RE2 semantics ---------------------------------------------------------


@pytest.mark.slow
def test_a_backtracking_budget_schedule_is_checked_in_linear_time(tmp_path):
    """A 403-character `schedule` that Python's `re` backtracks on for hours."""
    schedule = " " * 401 + "\n\n"
    write(tmp_path / "np.yaml", NODEPOOL.replace("SCHEDULE", json.dumps(schedule)))
    r = run("verify", ".", cwd=tmp_path, timeout=60)
    clean(r)
    assert re.search(r"np\.yaml:10:19: error\[GP835\]: NodePool gpu: spec\.disruption\.budgets\[0\]\.schedule", r.stderr)
    ok = tmp_path / "ok"
    write(ok / "np.yaml", NODEPOOL.replace("SCHEDULE", '"0 9 * * mon-fri"'))
    assert run("verify", "ok", cwd=tmp_path, timeout=60).returncode == 0


def test_a_pattern_re2_cannot_compile_is_a_warning_not_a_crash():
    from gpuplan.verify.schemas import _validator_class, schema_findings

    v = _validator_class()({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x$"},
                                                             "b": {"type": "string", "pattern": "^b+$"}}})
    got = [(c.code if c else None, p) for c, p, _, _ in schema_findings(v, {"a": "x", "b": "c"})]
    assert sorted(got, key=str) == sorted([("GP847", ("a",)), (None, ("b",))], key=str)


def test_patterns_have_go_semantics():
    from gpuplan.verify.schemas import _validator_class

    v = _validator_class()({"type": "string", "pattern": "^[0-9]+$"})
    assert v.is_valid("12") and not v.is_valid("12\n")  # Go's `$` is the end of text; Python's also before \n
    assert not _validator_class()({"type": "string", "pattern": r"^\d+$"}).is_valid("١٢")  # \d is ASCII in RE2


# --- CEL cost -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_quadratic_cel_rule_is_refused_by_the_cost_budget(tmp_path):
    keys = [f"k{i}" for i in range(8000)]
    soft = "{" + ", ".join(f"{k}: 1%" for k in keys) + "}"
    grace = "{" + ", ".join(f"{k}: 1m" for k in keys) + "}"
    write(tmp_path / "nc.yaml", EC2NODECLASS.replace("SOFT", soft).replace("GRACE", grace))
    r = run("verify", ".", cwd=tmp_path, timeout=120)
    clean(r)
    assert "error[GP843]" in r.stderr, r.stderr
    ok = tmp_path / "ok"
    write(ok / "nc.yaml", EC2NODECLASS.replace("SOFT", "{memory.available: 5%}")
          .replace("GRACE", "{memory.available: 1m}"))
    r = run("verify", "ok", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr


def test_nesting_counts_only_ranges_that_multiply():
    from gpuplan.verify.cel import nesting

    assert nesting("self.x > 0") == 0
    assert nesting("self.all(x, x in ['a(', \"all(\"])") == 1
    assert nesting("self.groups.all(g, g.flavors.all(f, f.resources.all(r, true)))") == 1
    assert nesting("self.all(x, self.filter(y, x == y).size() == 1)") == 2
    assert nesting("self.a.map(x, x).all(y, y)") == 1


# --- build reading the committed tree ---------------------------------------------------------------

OLD = """
import sys
from gpuplan.verify.verifier import read_old_objects
docs = [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"}}]
print(read_old_objects(sys.argv[1], "pools/gpu/nodepool.yaml", docs))
"""


@pytest.mark.parametrize("kind", ["bomb", "int", "sparse", "fifo", "zero", "outside"])
def test_a_hostile_old_tree_means_no_old_objects(tmp_path, kind):
    f = tmp_path / "generated" / "pools" / "gpu" / "nodepool.yaml"
    f.parent.mkdir(parents=True)
    if kind == "bomb":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
        f.write_text("\n".join(lines) + "\n")
    elif kind == "int":
        f.write_text("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: gpu}\nx: " + "9" * 5000 + "\n")
    elif kind == "sparse":
        f.write_bytes(b"")
        os.truncate(f, 6 * 1024 ** 3)
    elif kind == "fifo":
        os.mkfifo(f)
    elif kind == "zero":
        os.symlink("/dev/zero", f)
    else:
        write(tmp_path / "secret.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: gpu}\n")
        os.symlink(tmp_path / "secret.yaml", f)
    r = run(str(tmp_path / "generated"), cwd=REPO, timeout=60, code=OLD)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "{}"


@pytest.mark.slow
def test_an_alias_bomb_in_the_committed_tree_does_not_hang_build(tmp_path):
    import shutil

    shutil.copy(REPO / "examples" / "fleet.yaml", tmp_path / "fleet.yaml")
    first = run("build", "fleet.yaml", cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    [np] = sorted((tmp_path / "generated" / "pools").glob("*/nodepool.yaml"))[:1]
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    np.write_text("\n".join(lines) + "\n")
    r = run("build", "fleet.yaml", cwd=tmp_path, timeout=120)
    assert r.returncode != 4 and "Traceback" not in r.stderr, r.stderr
