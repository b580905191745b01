"""The loader: positions, YAML 1.2 scalars, and hostile input handled fast."""

from __future__ import annotations

import os

import pytest

from tests.conftest import finishes
from gpuplan.spec.loader import (
    MAX_BYTES, MAX_DEPTH, Limits, LoadError, load_file, load_text,
)


def codes(text: str) -> str:
    with pytest.raises(LoadError) as exc:
        load_text(text, "f.yaml")
    return exc.value.diag.code


def test_positions_of_keys_and_values_are_one_based():
    doc = load_text("a: 1\nb:\n  - x\n  - {c: d}\n", "f.yaml")
    assert doc.value_pos[("a",)] == (1, 4)
    assert doc.key_pos[("b",)] == (2, 1)
    assert doc.value_pos[("b", 1, "c")] == (4, 9)
    assert doc.locate(("b", 1, "missing")) == (4, 5)  # nearest parent


def test_yaml_1_2_core_scalars():
    doc = load_text("a: on\nb: yes\nc: 012\nd: 0x1F\ne: 1e3\nf: ~\ng: 0o17\nh: '5'\ni: .inf\n", "f.yaml")
    assert doc.data == {"a": "on", "b": "yes", "c": 12, "d": 31, "e": 1000.0, "f": None, "g": 15,
                        "h": "5", "i": float("inf")}


def test_merge_keys_and_aliases():
    doc = load_text("base: &b {x: 1, y: 2}\nuse: {<<: *b, y: 3}\n", "f.yaml")
    assert doc.data["use"] == {"x": 1, "y": 3}


@pytest.mark.parametrize("text,code", [
    ("a: 1\na: 2\n", "GP002"),
    ("", "GP003"),
    ("---\n...\n", "GP003"),
    ("a: 1\n---\nb: 2\n", "GP005"),
    ("a: [1\n", "GP001"),
    ("a: !!python/object:os.system x\n", "GP011"),
    ("a: !custom x\n", "GP011"),
    ("a: !!int x\n", "GP011"),
    ("? [a, b]\n: c\n", "GP012"),
    ("a: *nope\n", "GP001"),
])
def test_bad_yaml_becomes_a_diagnostic(text, code):
    assert codes(text) == code


def test_duplicate_key_names_the_first_line():
    with pytest.raises(LoadError) as exc:
        load_text("pools:\n  name: a\n  gpu: x\n  name: b\n", "f.yaml")
    d = exc.value.diag
    assert (d.code, d.line, d.col) == ("GP002", 4, 3)
    assert "line 2" in d.message


def test_billion_laughs_fails_fast():
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 10) + "]")
    text = "\n".join(lines) + "\n"
    assert finishes(lambda: codes(text)) == "GP006"  # sizes are counted, never expanded


def test_quadratic_blowup_by_one_big_anchor_fails_fast():
    # one anchor of 10k items aliased 1k times: 10M values if expanded
    text = "a: &a [" + ",".join(["x"] * 10_000) + "]\nb: [" + ",".join(["*a"] * 1000) + "]\n"
    assert finishes(lambda: codes(text)) == "GP006"


@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_deep_nesting_fails_fast(opener):
    text = "a: " + opener * 100_000
    assert finishes(lambda: codes(text)) == "GP009"
    with pytest.raises(LoadError) as exc:
        load_text("a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), "deep.yaml")
    assert exc.value.diag.code == "GP009"


def test_huge_file_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    p = tmp_path / "huge.yaml"
    with p.open("wb") as fh:
        fh.write(b"a: " + b"x" * (MAX_BYTES + 10) + b"\n")
    read: list[int] = []
    real_read = os.read

    def counting_read(fd, n):
        chunk = real_read(fd, n)
        read.append(len(chunk))
        return chunk

    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(LoadError) as exc:
        load_file(p)
    assert exc.value.diag.code == "GP007"
    assert sum(read) == 0  # refused from its size before a byte is read


def test_binary_and_non_utf8_input(tmp_path):
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"a: 1\n\x00\x01\x02\xff")
    with pytest.raises(LoadError) as exc:
        load_file(p)
    assert (exc.value.diag.code, exc.value.diag.line) == ("GP008", 2)
    p.write_bytes(b"a: caf\xe9\n")
    with pytest.raises(LoadError) as exc:
        load_file(p)
    assert (exc.value.diag.code, exc.value.diag.line, exc.value.diag.col) == ("GP008", 1, 7)


def test_missing_file(tmp_path):
    with pytest.raises(LoadError) as exc:
        load_file(tmp_path / "nope.yaml")
    assert exc.value.diag.code == "GP010"


def test_utf8_bom_is_accepted(tmp_path):
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_file(p).data == {"a": 1}


def test_pure_python_parser_gives_the_same_data_and_positions(monkeypatch):
    """Without ruamel.yaml.clib the loader uses ruamel's pure-Python parser."""
    from gpuplan.spec import loader

    text = (open(__file__.replace("tests/spec/test_loader.py", "examples/fleet.yaml")).read())
    fast = load_text(text, "f.yaml")
    monkeypatch.setattr(loader, "_parser_class", lambda: loader._pure_parser)
    slow = load_text(text, "f.yaml")
    assert slow.data == fast.data
    assert slow.value_pos == fast.value_pos and slow.key_pos == fast.key_pos
    with pytest.raises(LoadError) as exc:
        load_text("a: 1\na: 2\n", "f.yaml")
    assert exc.value.diag.code == "GP002"


@pytest.mark.slow
def test_positions_are_exact_past_any_packed_field_width():
    # positions are stored packed; a long line's column and a late line's number come back whole
    long_value = "x" * 70_000
    text = "".join(f"k{i}: {i}\n" for i in range(70_000)) + f"last: {{a: 1, b: {long_value}, c: 3}}\n"
    doc = load_text(text, "f.yaml", Limits(max_bytes=10_000_000, max_values=1_000_000))
    assert doc.locate(("k69999",), key=True) == (70_000, 1)
    assert doc.locate(("k69999",)) == (70_000, 9)
    last = text.splitlines()[-1]
    assert doc.locate(("last", "c"), key=True) == (70_001, last.index(", c: ") + 3)
    assert doc.value_pos.get(("last", "c")) == (70_001, last.index(", c: ") + 6)
    assert doc.value_pos.get(("nope",)) is None and ("last", "b") in doc.value_pos


def _syntax(tmp_path, text):
    import subprocess
    import sys

    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "gpuplan", "validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 1
    return r.stdout + r.stderr


@pytest.mark.parametrize("broken,line,what", [
    ("    kubernetesVersion \"1.33\"\n", 3, "without ':'"),
    ("\tkubernetesVersion: \"1.33\"\n", 3, "tab character"),
])
def test_a_syntax_error_is_shown_at_the_line_changed_with_its_code_frame(tmp_path, broken, line, what):
    """A key that lost its colon is reported where the key is, not where the scanner noticed (the
    next line); a tab is named as a tab; both with the code frame every other error has."""
    text = "apiVersion: gpuplan.dev/v1alpha1\nspec:\n" + broken + "    gitops: {engine: argocd}\n"
    out = _syntax(tmp_path, text)
    first = out.splitlines()[0]
    assert f"fleet.yaml:{line}:" in first and "error[GP001]" in first and what in first
    assert f"{line} | " in out and broken.strip("\n").lstrip("\t").strip() in out
