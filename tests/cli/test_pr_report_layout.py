"""What a reviewer SEES of the pull-request report: the comment is rendered as
GitHub renders Markdown (CommonMark plus tables, raw HTML passed through), and
only text outside every `<details>` (or in its `<summary>`) counts as visible.
Disruptions must be visible on any fleet size; only the capacity report folds."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from benchmarks.make_fleet import make
from gpuplan import pr_report
from gpuplan.pr_report import MAX_COMMENT, Run, cut, render

_MD = MarkdownIt("commonmark").enable("table")


# elements a browser sets apart: their text does not run into the next one's
_BREAKS = {"p", "li", "td", "th", "tr", "table", "pre", "br", "summary", "blockquote",
           "h1", "h2", "h3", "h4", "h5", "h6"}


class _Visibility(HTMLParser):
    """Text a browser shows of a collapsed page: nothing inside a closed
    `<details>` but its `<summary>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0  # open <details>
        self.summary = 0
        self.stray_close = 0
        self.visible: list[str] = []
        self.folded: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _BREAKS:
            self.handle_data(" ")
        if tag == "details":
            self.depth += 1
        elif tag == "summary":
            self.summary += 1

    def handle_endtag(self, tag):
        if tag in _BREAKS:
            self.handle_data(" ")
        if tag == "details":
            if self.depth:
                self.depth -= 1
            else:
                self.stray_close += 1
        elif tag == "summary" and self.summary:
            self.summary -= 1

    def handle_data(self, data):
        shown = self.depth == 0 or (self.depth == 1 and self.summary)
        (self.visible if shown else self.folded).append(data)


def seen(markdown: str) -> tuple[str, str]:
    """(visible text, folded text) of `markdown` as GitHub shows it; asserts every
    `<details>` is closed (an unclosed one folds everything after it)."""
    p = _Visibility()
    p.feed(_MD.render(markdown))
    p.close()
    assert p.depth == 0 and p.stray_close == 0, "unbalanced <details>"
    return re.sub(r"\s+", " ", "".join(p.visible)), re.sub(r"\s+", " ", "".join(p.folded))


def _built_base(tmp_path_factory, name: str, spec: str) -> tuple[Path, Path, str]:
    """(base, new, spec): ``spec`` built in base/ (its generated tree is the base), new/ empty."""
    d = tmp_path_factory.mktemp(name)
    base, new = d / "base", d / "new"
    base.mkdir()
    new.mkdir()
    (base / "fleet.yaml").write_text(spec)
    _gpuplan("build", "fleet.yaml", cwd=base)
    return base, new, spec


def _gpuplan(*args: str, cwd: Path) -> Run:
    r = subprocess.run((sys.executable, "-I", "-m", "gpuplan", *args), cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return Run(("gpuplan", *args), r.returncode, r.stdout, r.stderr)


def _without_tenant(spec: str, tenant: str) -> str:
    start = spec.index(f"    - name: {tenant}\n")
    end = spec.index("    - name: ", start + 1)
    return spec[:start] + spec[end:]


# --- the 2,000-node benchmark fleet, one tenant (three namespaces) removed ----------------


@pytest.fixture(scope="module")
def big_fleet(tmp_path_factory) -> pr_report.Collected:
    """benchmarks/make_fleet.py's default fleet (2,000 nodes, 1,000 tenants) with its
    generated tree as the base; the pull request removes tenant team-0005 (three
    namespaces). The real `gpuplan plan --base` and `gpuplan diff --old` outputs,
    made once, side by side (the git plumbing is tested on the small fleet)."""
    base, new, spec = _built_base(tmp_path_factory, "big", make(2000, 1000))
    (new / "fleet.yaml").write_text(_without_tenant(spec, "team-0005"))
    with ThreadPoolExecutor(2) as pool:
        plan = pool.submit(_gpuplan, "plan", "fleet.yaml", "--base", str(base / "fleet.yaml"),
                           "--format", "markdown", cwd=new)
        diff = pool.submit(_gpuplan, "diff", "fleet.yaml", "--old", str(base / "generated"),
                           "--format", "markdown", cwd=new)
        return pr_report.Collected("fleet.yaml", "main", "0" * 40, plan.result(), diff.result())


@pytest.mark.slow
def test_large_fleet_comment_shows_every_disruption(big_fleet):
    assert big_fleet.plan.code == 0 and big_fleet.diff.code == 0
    assert len(big_fleet.plan.stdout) > 2 * MAX_COMMENT  # the capacity report cannot fit
    text = big_fleet.render(MAX_COMMENT)
    assert len(text) <= MAX_COMMENT
    visible, folded = seen(text)
    for ns in ("team-0005-0", "team-0005-1", "team-0005-2"):
        assert f"destructive Namespace {ns} leaves the tree" in visible
        assert f"Namespace {ns} tenants/team-0005/namespaces.yaml" in visible  # the object diff's row
    assert "Disruptive changes (3)" in visible  # three namespaces, no hand step (#27)
    # changed: the root files, the AppProject, and the grant bindings (and messages) that named team-0005's namespaces
    assert "gpuplan diff: 0 added, 17 removed, 16 changed" in visible
    assert "Removed (17)" in visible and "Changed (16)" in visible
    assert "Change from base (synthetic-2000n-1000t → synthetic-2000n-1000t)" in visible
    assert "No node changes its MIG layout." in visible
    # the capacity report is what folds, and is cut (said so) inside its fold
    assert "Capacity report of this pull request's spec" in visible
    assert "Capacity: synthetic-2000n-1000t" in folded and "Capacity: synthetic-2000n-1000t" not in visible
    assert "Pools" in folded and "pool-000" not in visible
    assert "the capacity report is cut here to fit" in folded
    # nothing disruptive is folded away (the grant bindings' field changes, which name the
    # namespaces that leave, may fold with the other objects' fields)
    assert "leaves the tree" not in folded and "Namespace team-0005" not in folded


@pytest.mark.slow
def test_large_fleet_summary_is_whole_within_its_limit(big_fleet):
    text = pr_report.fit_summary(big_fleet)
    assert len(text.encode()) <= 1024 * 1024  # GitHub's limit of a step's summary
    visible, folded = seen(text)
    assert "destructive Namespace team-0005-2 leaves the tree" in visible
    assert "Notes" in folded and "cut here" not in text  # 480 kB of capacity report: all of it


# --- small fleets: the plan's own disruption table is not folded into the capacity report ----


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory) -> tuple[Run, Run]:
    """plan --base and diff --old of a 120-node fleet: tenant team-0001 removed and the
    A100 MIG layout changed on every A100 node at once (`rollout.maxUnavailable: 100%`: every
    A100 node drained)."""
    base, new, spec = _built_base(tmp_path_factory, "small", make(120, 12))
    layout = "      sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}\n"
    assert layout in spec
    changed = _without_tenant(spec, "team-0001").replace(
        layout, layout.replace("1g.10gb: 2", "1g.10gb: 1") + "      rollout: {maxUnavailable: 100%}\n")
    (new / "fleet.yaml").write_text(changed)
    plan = _gpuplan("plan", "fleet.yaml", "--base", str(base / "fleet.yaml"), "--format", "markdown", cwd=new)
    diff = _gpuplan("diff", "fleet.yaml", "--old", str(base / "generated"), "--format", "markdown", cwd=new)
    return plan, diff


def _render(runs: tuple[Run, Run], max_chars: int | None = MAX_COMMENT) -> str:
    return render(fleet="fleet.yaml", base_ref="main", base_commit="0" * 40, plan=runs[0], diff=runs[1],
                  max_chars=max_chars)


def _drained(plan: Run) -> list[str]:
    """The nodes the plan's disruption table drains."""
    return re.findall(r"^\| \*\*drain\*\* \| node (gpu-\d+) ", plan.stdout, re.M)


@pytest.mark.slow
def test_plan_disruption_table_is_visible_before_the_objects(small_runs):
    text = _render(small_runs)
    assert len(text) < MAX_COMMENT  # nothing cut: only the layout is under test
    visible, folded = seen(text)
    plan_part = visible.split("Generated objects (gpuplan diff)")[0]
    nodes = _drained(small_runs[0])
    assert len(nodes) >= 6
    for node in nodes:
        assert f"drain node {node} (pool " in plan_part
    for ns in ("team-0001-0", "team-0001-1", "team-0001-2"):
        assert f"destructive Namespace {ns} leaves the tree" in plan_part
    assert "Pools" in folded and "Pools" not in visible


def test_reduced_limit_cuts_capacity_only(small_runs):
    from gpuplan.pr_report import split_plan

    whole = _render(small_runs, 10**9)
    limit = len(whole) - len(split_plan(small_runs[0].stdout)[2]) // 3  # a third of the capacity report
    text = _render(small_runs, limit)
    assert len(text) <= limit < len(whole)
    visible, folded = seen(text)
    for node in _drained(small_runs[0]):
        assert f"drain node {node} (pool " in visible
    assert "Namespace team-0001-2 tenants/team-0001/namespaces.yaml" in visible
    assert "the capacity report is cut here to fit" in folded


def test_limit_below_the_disruptions_cuts_them_said_so_and_balanced(small_runs):
    text = _render(small_runs, 4000)
    assert len(text) <= 4000
    visible, _ = seen(text)
    # the most important part keeps its start: the namespaces, kept and holding nothing (no hand
    # step: the AppProject arrives through its own Application and keeps them, #27)
    assert "hand-step" not in visible and "destructive Namespace team-0001" in visible
    assert "nothing is held" in visible
    assert "more lines: cut here to fit" in visible
    assert "The capacity report does not fit here" in visible
    assert "Generated objects (gpuplan diff)" in visible


# --- cut(): whatever a cut leaves open is closed ------------------------------------------


def test_cut_inside_a_fence_closes_it():
    text = "intro\n\n````text\n" + "\n".join(f"line {i} ```" for i in range(200)) + "\n````\n\nafter"
    out = cut(text, 500, "NOTE")
    assert len(out) <= 500
    visible, _ = seen(out + "\n\n**bold**")
    html = _MD.render(out + "\n\n**bold**")
    assert "<strong>bold</strong>" in html  # the text after the cut is not code
    assert "more lines: NOTE" in visible and "line 0" in visible


def test_cut_inside_details_closes_it():
    block = ["<details>", "<summary>many fields</summary>", "", *[f"- field {i}" for i in range(300)], "",
             "</details>"]
    out = cut("\n".join(["| a | b |", "|---|---|", "| 1 | 2 |", "", *block]), 600, "NOTE")
    assert len(out) <= 600
    visible, folded = seen(out + "\n\nAFTER")
    assert "AFTER" in visible and "field 0" in folded and "many fields" in visible


def test_fitting_text_is_not_cut():
    assert cut("a\nb\n", 10, "NOTE") == "a\nb"


def test_a_part_left_open_cannot_fold_the_parts_after_it():
    """A plan whose disruption block leaves a `<details>` open, and whose change
    section leaves a fence open: what comes after each stays visible, as prose."""
    plan = Run(("gpuplan", "plan"), 0, "### Disruptive changes (1)\n\n<details>\n\n- folded\n\n"
                                       "# Capacity: f\n\n## Pools\n\n## Change from base (a → b)\n\n- drained\n\n"
                                       "```text\nunclosed\n", "")
    diff = Run(("gpuplan", "diff"), 0, "**gpuplan diff**: 1 removed\n\n| Kind | Name |\n|---|---|\n| Namespace | ns |\n", "")
    text = render(fleet="f.yaml", base_ref="main", base_commit="0" * 40, plan=plan, diff=diff)
    visible, folded = seen(text)
    assert "folded" in folded
    assert "Change from base (a → b)" in visible and "drained" in visible
    assert "<td>Namespace</td>" in _MD.render(text)  # the object table is a table, not code
    assert "Pools" in folded
