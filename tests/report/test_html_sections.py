"""The HTML capacity report carries every section the other formats have, colours a tier by how
full its pool resource is, and gives a MIG profile one colour in every diagram."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.outputkit import REPO

EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.yaml"))


def _plan(example: str, fmt: str) -> str:
    r = subprocess.run([sys.executable, "-m", "gpuplan", "plan", f"examples/{example}.yaml", "--format", fmt],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_html_has_the_sections_of_markdown(example):
    md = [h.removeprefix("## ") for h in _plan(example, "markdown").splitlines() if h.startswith("## ")]
    html = [h for h in re.findall(r"<h2>(.*?)</h2>", _plan(example, "html")) if h != "Quota against capacity"]
    assert [h.replace("×", "x") for h in html] == md


def test_bar_colour_follows_saturation(tmp_path):
    from dataclasses import replace

    from gpuplan.capacity import capacity
    from gpuplan.report.html import BAD, FULL, OK, WARN, _bar_colour
    from tests.report.helpers import SCENARIO, resolved

    t = next(t for t in capacity(resolved(tmp_path, SCENARIO)).tiers if t.capacity >= 10)

    def at(share: float, limit: float = 2.0) -> str:
        return _bar_colour(replace(t, pool_resource_quota=round(share * t.capacity), max_oversubscription=limit))

    assert [at(0.1), at(0.5), at(0.9), at(1.0), at(1.5)] == [OK, OK, FULL, FULL, WARN]
    assert at(1.5, limit=1.0) == BAD


def test_a_mig_profile_has_one_colour_in_every_diagram():
    html = _plan("onprem-capi", "html")
    figures = re.findall(r"<figure>.*?</figure>", html, re.S)
    assert len(figures) >= 2
    seen: dict[str, set[str]] = {}
    for fig in figures:
        legend = re.findall(r'background:(#[0-9a-f]{6});margin:0 4px 0 10px"></span>([^<]+)', fig)
        for colour, profile in legend:
            seen.setdefault(profile, set()).add(colour)
    assert len(seen) >= 2 and all(len(c) == 1 for c in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen), "profiles differ in colour"
