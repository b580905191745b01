"""Markdown reports quote strings a pull request controls (the old tree's names, labels and
annotations; spec values): each is escaped at one place (gpuplan.report.markdown) and renders
as the text it is, never as markup. Rendered through a CommonMark renderer with HTML on, as
GitHub renders a comment: the test asserts what a reader sees, not the Markdown source."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from gpuplan.report.markdown import md_code, md_fence, md_text
from tests.report.trees import build_example, diff, docs, write_docs

PAYLOADS = [
    "</details>",
    "<img src=https://evil.example/x>",
    "# heading",
    "[link](https://evil.example/)",
    "![x](https://evil.example/i.png)",
    "<!-- everything after this is hidden",
    "`code` and ``` a fence",
    "two\nlines\r\n# and a heading",
    "*bold* _em_ **strong** __strong__",
    "~~strike~~ $x^2$",
    "| a | b |",
    "&lt;img&gt; &amp; &#60;b&#62;",
    "- a list item",
    "1. ordered",
    "+ plus",
    "---",
    "    indented code",
    "> quote",
    "\\* backslash",
    "<https://evil.example/>",
    "[ref]: https://evil.example/",
    "a CI log\n::warning title=x::pwned",
]


def md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def tags(rendered: str) -> set[str]:
    return set(re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", rendered))


def text_of(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


def one_line(p: str) -> str:
    return re.sub("\r\n|[\r\n]", " ", p)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_md_text_renders_as_the_text_it_is(payload):
    for source, allowed in ((md_text(payload), {"p", "/p"}), (f"- {md_text(payload)}", {"ul", "/ul", "li", "/li"})):
        assert "\n" not in source
        out = md().render(source)
        assert tags(out) <= allowed, (source, out)
        assert text_of(out) == one_line(payload).strip() or text_of(out) == one_line(payload), (source, out)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_md_text_in_a_table_cell_stays_one_cell(payload):
    source = f"| a | b |\n|---|---|\n| {md_text(payload, cell=True)} | x |\n"
    out = md().render(source)
    assert tags(out) <= {"table", "/table", "thead", "/thead", "tbody", "/tbody", "tr", "/tr", "th", "/th",
                         "td", "/td"}, out
    cells = re.findall(r"<td>(.*?)</td>", out, re.S)
    assert [text_of(c) for c in cells] == [one_line(payload).strip(), "x"], out


def test_md_text_leaves_ordinary_text_alone():
    # names, resources and numbers of the generated CAPACITY.md are unchanged
    for s in ("nvidia.com/mig-3g.40gb", "gpu-a100-01", "4,672.00", "0.50×", "-3", "+4", "—", "4 × 8 (max)",
              "{3g.40gb: 2}", "pool infer: 1 node drained"):
        assert md_text(s) == s


def test_md_text_shows_control_characters():
    out = md_text("a\x07b\u202ec")
    assert "\x07" not in out and "\u202e" not in out
    assert text_of(md().render(out)) == "a\\x07b\\u202ec"


def test_md_code_and_md_fence_cannot_be_closed_from_inside():
    for payload in PAYLOADS:
        out = md().render(md_code(payload))
        assert tags(out) <= {"p", "/p", "code", "/code"}, out
        out = md().render(md_fence(payload + "\n```\n# after", "text") + "\n\nafter")
        assert tags(out) <= {"pre", "/pre", "code", "/code", "p", "/p"}, out
        assert out.rstrip().endswith("<p>after</p>"), out


# --- every Markdown report ------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path]:
    """examples/fleet.yaml built, and an old tree beside it whose objects carry every payload:
    in a node's device-plugin label (a disruption message), as the names of a Namespace and a
    PriorityClass that leave the tree, in annotations and labels (changed fields)."""
    root = tmp_path_factory.mktemp("md")
    tree = build_example(root)
    old = root / "old"
    shutil.copytree(tree, old)
    rules = old / "pools" / "train-a100" / "node-labels.yaml"
    d = docs(rules)
    labels = d[0]["spec"]["rules"][0]["labels"]
    labels["nvidia.com/device-plugin.config"] = " ".join(PAYLOADS)
    d[0]["metadata"]["annotations"]["evil"] = "\n".join(PAYLOADS)
    d[0]["metadata"]["labels"]["evil"] = PAYLOADS[0]
    write_docs(rules, d)
    ns = old / "tenants" / "nlp" / "namespaces.yaml"
    d = docs(ns)
    for i, p in enumerate(PAYLOADS):
        name = one_line(p)  # a name holds no line break (GP839): one line of each payload
        d.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{name} {i}"}})
    write_docs(ns, d)
    pcs = old / "cluster" / "priorityclasses.yaml"
    d = docs(pcs)
    d.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": PAYLOADS[1]},
              "value": 1})
    write_docs(pcs, d)
    return root, old


def test_diff_markdown_of_a_hostile_old_tree_is_inert(hostile):
    root, old = hostile
    r = diff(root / "fleet.yaml", old, "--format", "markdown")
    assert r.exit_code == 0, r.output
    out = r.stdout
    head, _, objects = out.partition("**gpuplan diff**")
    # the disruption block: every payload escaped in the source
    assert "Namespace" in head and "nvidia.com/device-plugin.config" in head
    assert "<" not in head and "](" not in head and "<!--" not in head and "\r" not in head
    assert [ln for ln in head.splitlines() if ln.startswith("#")] == [head.splitlines()[0]]
    assert head.splitlines()[0].startswith("### :warning: Disruptive changes")
    # ... and still readable: the escaped forms are there
    for escaped in ("&lt;/details>", "&lt;img src=https://evil.example/x>", "\\# heading",
                    "\\[link\\]\\(https://evil.example/)", "&lt;!-- everything", "\\`code\\`"):
        assert escaped in head, escaped
    # the whole comment, as GitHub shows it: no element of the payloads, every fold closed
    rendered = md().render(out)
    assert "<img" not in rendered and "<a " not in rendered and "<!--" not in rendered
    assert not re.search(r"<h[1-6]>[^<]*heading", rendered)
    assert rendered.count("<details>") == rendered.count("</details>")
    assert "&lt;img src=https://evil.example/x&gt;" in rendered  # shown, as text


def test_diff_text_of_a_hostile_old_tree_keeps_one_line_per_entry(hostile):
    """The text format goes to a terminal or a CI log: a line break in a label value does not
    start a line there (a workflow command, a fake entry)."""
    root, old = hostile
    r = diff(root / "fleet.yaml", old)
    assert r.exit_code == 0, r.output
    head = r.stdout.split("\n\n")[0].splitlines()
    assert head[0].startswith("DISRUPTIVE CHANGES")
    assert all(ln.startswith(("  [", "  pool ")) for ln in head[1:]), head
    assert any("\\n::warning title=x::pwned" in ln for ln in head)


def test_pr_report_keeps_a_hostile_diff_inside_its_part(hostile):
    """The pull-request report quotes the diff whole: nothing in it closes the report's own folds."""
    from gpuplan.pr_report import Run, render

    root, old = hostile
    r = diff(root / "fleet.yaml", old, "--format", "markdown")
    plan = Run(("gpuplan", "plan"), 0, "# Capacity: x\n\nbody\n\n## Change from base (a → b)\n\nnone\n", "")
    doc = render(fleet="fleet\n# x`y", base_ref="main", base_commit="0" * 40, plan=plan,
                 diff=Run(("gpuplan", "diff"), 0, r.stdout, ""), max_chars=None)
    rendered = md().render(doc)
    assert "<img" not in rendered and "<!--" not in rendered.replace("<!-- gpuplan-pr-report -->", "")
    assert rendered.count("<details>") == rendered.count("</details>")
    assert "fleet\n" not in doc  # the fleet path, quoted in a code span, stays on its line


OURS = ("Change from base", "Disruptive changes", "Allocation back-end migration", "pool ", "pods", "quota keys",
        "objects", "Proposed MIG layouts")


def test_plan_renderers_escape_what_they_quote():
    """`plan --base --format markdown`: the change from base, the migration steps and the
    --optimise section quote spec values; each renders as text."""
    from gpuplan.report.diff import CapacityDiff, Drain, Metric, render_diff_markdown
    from gpuplan.report.migration import Migration, PoolMove, QuotaChange, TierEffect, render_markdown
    from gpuplan.report.optimise import Optimisation

    evil = "<img src=https://evil.example/x> [l](https://evil.example/) # h\n</details>"
    d = CapacityDiff(evil, evil, (), (Drain(evil, evil, (0,), (None,), ((("1g", 7),),)),), (evil,),
                     ((evil, evil, evil),), Metric("cost/month", 1.0, 2.0), Metric("physical GPUs", 1, 2))
    m = Migration([PoolMove(evil, "device-plugin", "dra", (evil,), False, (evil, f"`kubectl cordon {evil}`"))],
                  objects=[("added", evil)], tiers=[TierEffect(evil, evil, evil, True, evil)],
                  quotas=[QuotaChange(evil, evil, evil, None, evil)], overlaps=[evil])
    o = Optimisation(evil, (), "", "--- a\n+++ b\n+# ```\n+</details>\n", (evil,))
    for out in (render_diff_markdown(d), render_markdown(m), o.markdown()):
        rendered = md().render(out)
        assert "<img" not in rendered and "<a " not in rendered and "</details>" not in rendered, out
        heads = re.findall(r"<h[1-6]>(.*?)</h[1-6]>", rendered, re.S)
        assert heads and all(h.startswith(OURS) for h in heads), heads  # no heading of the payload's
