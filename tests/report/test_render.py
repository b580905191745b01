"""Renderers: text, markdown, json, html (content and determinism)."""

import json
import re

import pytest

from gpuplan.capacity import capacity
from gpuplan.report.render import render
from tests.report.helpers import SCENARIO, resolved


@pytest.fixture
def report(tmp_path):
    return capacity(resolved(tmp_path, SCENARIO))


def test_text(report):
    out = render("text", report)
    assert out.startswith("Capacity: platform\n")
    assert "32 physical GPUs in 3 pools; quotas grant 26 GPU-equivalents; cost 37,376.00 per month" in out
    row = next(line for line in out.splitlines() if line.startswith("inference "))
    assert row.split() == ["inference", "infer", "nvidia.com/mig-3g.40gb", "12", "16", "0.75×", "1×", "6",
                           "7,008.00", "ok"]
    assert "compute [" in out and "memory  [" in out  # the slice diagram of {3g.40gb: 2}


def test_markdown(report):
    out = render("markdown", report)
    assert out.startswith("# Capacity: platform\n")
    assert "| notebooks | dev | nvidia.com/gpu.shared | 8 | 16 | 0.50× | 1× | 4 | 4,672.00 | ok |" in out
    assert "| nlp total |  |  |  | 14 | 16,352.00 |" in out
    assert "```\nA100-SXM4-80GB: 7 compute slices, 8 memory slices" in out


def test_json(report):
    data = json.loads(render("json", report))
    assert data["physicalGPUs"] == 32 and data["costPerMonth"] == 37376.0
    tier = {t["name"]: t for t in data["tiers"]}["inference"]
    assert (tier["capacity"], tier["quota"], tier["oversubscription"], tier["costPerMonth"]) == (16, 12, 0.75, 7008.0)
    pool = {p["name"]: p for p in data["pools"]}["infer"]
    assert pool["idleComputeSlices"] == 8 and pool["migLayouts"][0]["layout"] == {"3g.40gb": 2}


def test_html_is_self_contained(report):
    out = render("html", report)
    assert out.startswith("<!DOCTYPE html>")
    assert out.count("<svg") == 2  # the bar chart and one slice diagram
    lowered = out.lower()
    for banned in ("<script", "<link", "@import", "url(", "src=", "@font-face"):
        assert banned not in lowered, banned
    # the only URL is the SVG namespace (an identifier, never fetched)
    assert set(re.findall(r"https?://[^\"' <]+", out)) == {"http://www.w3.org/2000/svg"}
    assert "12 / 16 mig-3g.40gb (0.75×)" in out


def test_html_escapes_spec_text(tmp_path):
    # names are DNS labels, but the description-free report still escapes what it prints
    from gpuplan.report.html import render_html

    r = capacity(resolved(tmp_path, SCENARIO))
    out = render_html(r)
    assert "<b>infer</b> (A100-SXM4-80GB)" in out


def test_deterministic(tmp_path, report):
    again = capacity(resolved(tmp_path, SCENARIO, "again.yaml"))
    for fmt in ("text", "markdown", "json", "html"):
        assert render(fmt, report) == render(fmt, again)
