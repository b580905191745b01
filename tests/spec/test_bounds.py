"""Every number in the spec has a documented bound (docs/limits.md): a value past it is
GP109 at its line, saying why the bound is there, in well under a second; the bound
itself is accepted. Huge values never reach the rules (whose work would grow with them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import HANG, finishes
from tests.rules.helpers import BASE, edit, position

HUGE = "0x" + "f" * 3000  # about 3,600 decimal digits: past what str(int) may print

# (edit: old -> new with {v}, bound that passes, value past it, words from the reason)
CASES = {
    "gpusPerNode": ("gpusPerNode: 4\n      nodes: [n1, n2]", "gpusPerNode: {v}\n      nodes: [n1, n2]", 64, 65,
                    "no GPU server"),
    "replicas": ("replicas: 4}", "replicas: {v}}", 1024, 1025, "replicas of one GPU"),
    "migCount": ("layout: {1g.10gb: 7}", "layout: {1g.10gb: {v}}", None, 65, "MIG instances"),
    "priority": ("priority: 1000}", "priority: {v}}", 1_000_000_000, 1_000_000_001, "reserved for system"),
    "quota": ("training: 8,", "training: {v},", None, 102_400_001, "no fleet holds"),
    "maxGPUsPerPod": ("priority: 1000}", "priority: 1000, maxGPUsPerPod: {v}}", None, 65_537,
                      "no node advertises"),
    "price": ("pricePerGPUHour: 2.0\n    - name: infer", "pricePerGPUHour: {v}\n    - name: infer", 1000, 1000.5,
              "per GPU-hour"),
    "oversubscription": ("priority: 1000}", "priority: 1000, maxOversubscription: {v}}", 100, 100.5, "capacity"),
}


def _spec(case: str, value) -> tuple[str, str]:
    old, new, *_ = CASES[case]
    shown = str(value)
    return edit(BASE, old, new.replace("{v}", shown)), shown


def _diags(tmp_path, text):
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    return finishes(lambda: check_fleet(p).diagnostics)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("which", ["past", "huge"])
def test_past_the_bound(tmp_path, case, which):
    value = CASES[case][3] if which == "past" else HUGE
    text, shown = _spec(case, value)
    errors = [d for d in _diags(tmp_path, text) if d.is_error]
    assert [d.code for d in errors] == ["GP109"], errors
    d = errors[0]
    assert (d.line, d.col) == position(text, shown)
    assert CASES[case][4] in d.message
    assert d.hint and d.hint.startswith("use a value at most")


@pytest.mark.parametrize("case", [c for c, v in CASES.items() if v[2] is not None])
def test_the_bound_itself_is_accepted(tmp_path, case):
    text, _ = _spec(case, CASES[case][2])
    assert not [d for d in _diags(tmp_path, text) if d.code == "GP109"]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_price_must_be_finite(tmp_path, value):
    text, _ = _spec("price", value)
    (d,) = [d for d in _diags(tmp_path, text) if d.is_error]
    assert d.code == "GP109" and "finite" in d.message and d.hint


@pytest.mark.parametrize("value", ["720h", "Never", "2562047h"])
def test_duration_within_go_duration(value):
    from gpuplan.spec.models import _duration

    assert _duration(value) == value


@pytest.mark.parametrize("value", ["2562048h", "9" * 30 + "h", "1" * 40 + "s"])
def test_duration_past_go_duration(value):
    from pydantic_core import PydanticCustomError

    from gpuplan.spec.models import _duration

    with pytest.raises(PydanticCustomError):
        _duration(value)


def test_gpus_per_node_as_float_says_what_to_write(tmp_path):
    text, _ = _spec("gpusPerNode", "4.0")
    (d,) = [d for d in _diags(tmp_path, text) if d.is_error]
    assert d.code == "GP103" and "4.0" in d.message and d.hint == "write 4 (an integer, without a decimal point)"


@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, "0o" + "7" * 4000, "1e400", "10000000"])
def test_cli_never_exits_4(tmp_path, value):
    text, _ = _spec("gpusPerNode", value)
    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "gpuplan", "validate", str(p)], capture_output=True, text=True,
                       timeout=HANG)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
