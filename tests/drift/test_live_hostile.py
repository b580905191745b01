"""`gpuplan verify-cluster --live`: hostile and malformed input.

kubectl output is recorded by someone else and can be anything. Every input
here must end in exit 0, 1 or 6 with diagnostics, never exit 4, a traceback,
a hang or unbounded memory. The structural fuzz substitutes every JSON type
for every field drift.py reads; the process tests run the real CLI under
RLIMIT_AS with a timeout guard (a guard against a hang, not a speed check)."""

from __future__ import annotations

import copy
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet, planned_quotas
from gpuplan.diagnostics import normalise
from gpuplan.drift import LiveInputError, parse_live, verify
from gpuplan.reporters.formats import FORMATS, render
from tests.conftest import HANG, REPO
from tests.outputkit import EXAMPLES

FIX = Path(__file__).parent / "fixtures"
SPEC = str(EXAMPLES["argocd"].relative_to(EXAMPLES["argocd"].parents[1]))
AS_LIMIT = 1 << 30  # 1 GiB of address space for the whole gpuplan process


@pytest.fixture(scope="module")
def rf():
    c = check_fleet(EXAMPLES["argocd"])
    assert c.resolved is not None
    return c.resolved


def base() -> dict:
    return json.loads((FIX / "fleet-live.json").read_text(encoding="utf-8"))


def outcome(rf, text: str | bytes) -> list:
    """What the CLI would print, in every format, as bytes written to a strict
    UTF-8 stream (a lone surrogate must not reach the writer)."""
    try:
        diags = normalise(verify(rf, parse_live([("live.json", text)]), planned_quotas(rf)).diagnostics)
    except LiveInputError as exc:
        diags = list(getattr(exc, "diags", [exc.diag]))
    for fmt in FORMATS:
        out = render(fmt, diags).encode("utf-8")
        # a value from the input never becomes a workflow command, in any format
        assert b"##[" not in out, fmt
        assert not any(line.lstrip().startswith(b"::") and not line.startswith((b"::error ", b"::warning ",
                                                                                   b"::notice "))
                       for line in out.splitlines()), fmt
    return diags


# --- structural fuzz: every field drift.py reads, every JSON type -------------

HUGE_INT = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000
VALUES = [None, True, False, 0, -1, 1.5, "", "x", "4", "\ud800", "##[warning]forged", "a\n::error::x",
          [], [1, "a"], {}, {"a": {"b": []}},
          "@RAW@" + HUGE_INT, "@RAW@-" + HUGE_INT, "@RAW@1e999", "@RAW@-1e999", "@RAW@NaN", "@RAW@Infinity",
          "@RAW@" + DEEP]


def dumps_raw(doc) -> str:
    """JSON text, with "@RAW@<literal>" strings replaced by the literal itself
    (numbers and nesting json.dumps cannot or will not write)."""
    return re.sub(r'"@RAW@([^"]*)"', lambda m: m.group(1), json.dumps(doc))


def _item(doc: dict, name: str) -> dict:
    return next(i for i in doc["items"] if i["metadata"]["name"] == name)


def _set(obj, path: tuple, value):
    for k in path[:-1]:
        obj = obj.setdefault(k, {}) if isinstance(obj, dict) else obj[k]
    obj[path[-1]] = value


_STATIC, _MIG, _KARP = "gpu-a100-01", "gpu-a100-05", "ip-10-0-37-211.ec2.internal"
_NODE_FIELDS = [
    (), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "labels"),
    ("metadata", "labels", "gpuplan.dev/pool"), ("metadata", "labels", "karpenter.sh/nodepool"),
    ("metadata", "labels", "nvidia.com/mig.config.state"), ("metadata", "labels", "nvidia.com/device-plugin.config"),
    ("spec",), ("spec", "taints"), ("spec", "taints", 0), ("spec", "taints", 0, "key"),
    ("spec", "taints", 0, "effect"), ("spec", "taints", 0, "value"), ("status",),
    ("status", "capacity"), ("status", "allocatable"), ("status", "capacity", "nvidia.com/gpu"),
    ("status", "allocatable", "nvidia.com/gpu"), ("status", "capacity", "nvidia.com/mig-3g.40gb"),
    ("status", "capacity", "nvidia.com/other"),
]
_QUOTA_FIELDS = [
    (), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("spec",), ("spec", "hard"),
    ("spec", "hard", "requests.nvidia.com/gpu"), ("spec", "hard", "requests.nvidia.com/other"),
    ("spec", "scopeSelector"),
]
CASES = ([("top", (f,)) for f in ("kind", "items", "apiVersion")] + [("top", ())]
         + [(n, f) for n in (_STATIC, _MIG, _KARP) for f in _NODE_FIELDS]
         + [("quota", f) for f in _QUOTA_FIELDS])


def _target(doc: dict, where: str):
    if where == "top":
        return doc
    if where == "quota":
        return next(i for i in doc["items"] if i["kind"] == "ResourceQuota")
    return _item(doc, where)


@pytest.mark.parametrize("where,path", CASES, ids=[f"{w}:{'.'.join(map(str, p)) or '<self>'}" for w, p in CASES])
def test_every_field_every_json_type_is_a_diagnostic_not_a_crash(rf, where, path):
    crashes = []
    for value in VALUES:
        doc = base()
        if where == "top" and not path:
            text = dumps_raw(value)
        else:
            target = _target(doc, where)
            if path:
                _set(target, path, value)
            else:
                doc["items"][doc["items"].index(target)] = value
            text = dumps_raw(doc)
        try:
            outcome(rf, text)  # raises on a crash, a forged command or an unencodable character
        except Exception as exc:  # noqa: BLE001 - collected: one report per field, every value that broke it
            crashes.append(f"{str(value)[:30]!r}: {type(exc).__name__}")
    assert crashes == []


def test_lone_surrogate_node_name_renders_in_github_format(rf):
    doc = base()
    node = _item(doc, _STATIC)
    node["metadata"]["name"] = "gpu-\ud800"
    node["metadata"]["labels"]["gpuplan.dev/pool"] = "train-a100"
    diags = outcome(rf, json.dumps(doc))
    assert any("\\ud800" in d.message for d in diags)


def test_json_format_neutralises_workflow_commands_from_labels(rf):
    doc = base()
    _item(doc, _STATIC)["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "##[warning]forged"
    diags = outcome(rf, json.dumps(doc))
    assert [d.code for d in diags] == ["GP872"]
    assert "##[" not in diags[0].message


def test_taint_hint_never_pastes_a_hostile_node_name_into_a_shell_command(rf):
    doc = base()
    node = _item(doc, _KARP)
    node["metadata"]["name"] = "x; rm -rf ~"
    node["spec"]["taints"] = []
    hints = [d.hint for d in outcome(rf, json.dumps(doc)) if d.code == "GP873"]
    assert hints and all("rm -rf ~" not in h or "'x; rm -rf ~'" in h for h in hints)


def test_taint_hint_for_a_valid_name_is_a_command_to_paste(rf):
    doc = base()
    node = _item(doc, _KARP)
    node["spec"]["taints"] = []
    hints = sorted(d.hint for d in outcome(rf, json.dumps(doc)) if d.code == "GP873")
    assert hints[0] == f"kubectl taint node {_KARP} gpuplan.dev/pool=burst-h100:NoSchedule"


def test_duplicate_items_key_is_refused_not_read_as_an_empty_cluster(rf):
    doc = base()
    text = json.dumps(doc)
    # the last `items` wins in Python's json: every node would vanish and the cluster look "as planned"
    text = text[:-1] + ', "items": []}'
    diags = outcome(rf, text)
    assert [d.code for d in diags] == ["GP880"]
    assert "items" in diags[0].message


def test_duplicate_key_deep_inside_is_located_by_json_path(rf):
    text = json.dumps(base()).replace('"gpuplan.dev/pool": "train-a100"',
                                      '"gpuplan.dev/pool": "train-a100", "gpuplan.dev/pool": "other"', 1)
    [d] = outcome(rf, text)
    assert d.code == "GP880"
    assert 'items[0].metadata.labels["gpuplan.dev/pool"]' in d.message


@pytest.mark.parametrize("literal", [HUGE_INT, "-" + HUGE_INT, "1" * 40, "1e999", "-1e999", "NaN", "Infinity",
                                     "1." + "5" * 5000])
def test_numbers_out_of_range_are_refused_at_their_path(rf, literal):
    doc = base()
    _item(doc, _STATIC)["status"]["capacity"]["nvidia.com/gpu"] = "@RAW@" + literal
    [d] = outcome(rf, dumps_raw(doc))
    assert d.code == "GP881"
    assert 'items[0].status.capacity["nvidia.com/gpu"]' in d.message


def test_quantity_of_many_digits_is_not_converted(rf):
    doc = base()
    _item(doc, _STATIC)["status"]["capacity"]["nvidia.com/gpu"] = "9" * 5000 + "k"
    diags = outcome(rf, json.dumps(doc))
    assert [d.code for d in diags] == ["GP874"]
    assert len(diags[0].message) < 1000  # the value is shown shortened


def test_wrong_types_are_reported_at_their_json_path(rf):
    doc = base()
    _item(doc, _STATIC)["metadata"]["labels"] = ["a", "b"]
    _item(doc, _MIG)["status"]["capacity"] = "8"
    diags = outcome(rf, json.dumps(doc))
    assert {d.code for d in diags} == {"GP882"}
    msgs = " ".join(d.message for d in diags)
    assert "items[0].metadata.labels" in msgs and "items[4].status.capacity" in msgs
    assert all(d.file == "live.json" for d in diags)


def test_too_deep_is_refused(rf):
    doc = base()
    deep: list = []
    for _ in range(100):
        deep = [deep]
    _item(doc, _STATIC)["metadata"]["annotations"]["x"] = deep  # not a field drift reads: still refused
    [d] = outcome(rf, json.dumps(doc))
    assert d.code == "GP009"


def test_many_values_are_refused_before_parsing(rf):
    [d] = outcome(rf, "[" + "{}," * 5_000_000 + "{}]")
    assert d.code == "GP014"


def test_kubectl_like_documents_within_limits_still_verify(rf):
    doc = base()
    doc["items"][0]["metadata"]["annotations"]["note"] = "[[[{{{ ]]] \\\" unbalanced in a string"
    assert outcome(rf, json.dumps(doc)) == []


# --- the real CLI, bounded: RLIMIT_AS and a timeout guard ----------------------

def _limit_as():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def gpuplan(*args: str, stdin=None, input: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUTF8="1")
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "gpuplan", "verify-cluster", SPEC, *args], cwd=REPO, env=env,
                          stdin=stdin, input=input, capture_output=True, timeout=HANG, preexec_fn=_limit_as)


def assert_refused(r: subprocess.CompletedProcess, code: str) -> None:
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1, err
    assert f"error[{code}]" in err, err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.slow
def test_gigabyte_on_stdin_is_refused_within_bounded_memory():
    # `yes`-like: 1 GiB streamed from another process, never held by the test
    feeder = subprocess.Popen([sys.executable, "-c",
                               "import os\nb = b'[' + b' ' * ((1 << 20) - 1)\n"
                               "try:\n    for _ in range(1024): os.write(1, b)\n"
                               "except OSError: pass"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        r = gpuplan("--live", "-", stdin=feeder.stdout)
    finally:
        feeder.stdout.close()
        feeder.kill()
        feeder.wait()
    assert_refused(r, "GP007")


@pytest.mark.slow
def test_dev_zero_as_stdin_is_refused():
    with open("/dev/zero", "rb") as zero:
        assert_refused(gpuplan("--live", "-", stdin=zero), "GP007")


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/dev/zero", "fifo", "dir"])
def test_non_regular_live_path_is_refused_at_once(tmp_path, path):
    if path == "fifo":
        os.mkfifo(tmp_path / "fifo")  # no writer: opening it normally would block for ever
        path = str(tmp_path / "fifo")
    elif path == "dir":
        path = str(tmp_path)
    assert_refused(gpuplan("--live", path), "GP013")


def test_huge_file_is_refused_by_size(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(200 << 20)  # sparse: 200 MiB of NULs that cost no disk
    assert_refused(gpuplan("--live", str(big)), "GP007")


@pytest.mark.slow
def test_missing_file_is_exit_1():
    assert_refused(gpuplan("--live", "/nonexistent/live.json"), "GP010")


# short ids: pytest puts the test's id in PYTEST_CURRENT_TEST, and a 100,000-bracket id
# would not fit in the child process's environment (E2BIG)
@pytest.mark.slow
@pytest.mark.parametrize("text,code", [
    (DEEP, "GP009"),
    ('{"kind": "List", "items": [' + HUGE_INT + "]}", "GP881"),
    ('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": 1e999}}]}', "GP881"),
    ('{"kind": "List", "items": {"a": 1}}', "GP870"),
    ('{"kind": "List", "items": [[]]}', "GP882"),
    ('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a", "labels": []}}]}', "GP882"),
    (json.dumps({"kind": "List", "items": []})[:-1] + ', "items": []}', "GP880"),
    ("\xff\xfe{}", "GP008"),
], ids=["deep", "huge-int", "inf", "items-object", "item-list", "labels-list", "duplicate-items", "not-utf8"])
def test_cli_refuses_with_exit_1(text, code):
    raw = text.encode("latin-1") if text.startswith("\xff") else text.encode()
    assert_refused(gpuplan("--live", "-", input=raw), code)


@pytest.mark.slow
def test_cli_github_format_with_lone_surrogate_and_forged_command():
    doc = base()
    node = _item(doc, _STATIC)
    node["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "##[warning]forged\ud800"
    for fmt in ("github", "json", "text", "sarif"):
        r = gpuplan("--live", "-", "--format", fmt, input=json.dumps(doc).encode())
        assert r.returncode == 6, r.stderr
        out = r.stdout + r.stderr
        assert b"##[" not in out and b"Traceback" not in out
