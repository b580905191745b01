"""The pull-request report of the GitHub Action: what a spec change does to the cluster.

    python -I -m gpuplan.pr_report [--fleet fleet.yaml] [--output generated] [--base-ref main]
                                   [--summary FILE] [--report FILE] [--comment] [--annotations]

Run it with ``-I``: a pull request's checkout is untrusted, and ``python -m``
without it puts the working directory first on ``sys.path``, so a
``gpuplan/__init__.py`` in the pull request would run instead of gpuplan.

Checks the base branch out beside the work tree (``git worktree``), then runs

- ``gpuplan plan FLEET --base <base FLEET> --format markdown``: the disruption
  report (nodes drained for a MIG change, removed tiers and tenants,
  PriorityClass changes) and the capacity report, and
- ``gpuplan diff FLEET -o OUTPUT --old <base OUTPUT> --format markdown``: every
  object the pull request adds, removes or changes against the tree the base
  branch deploys today,

and, with ``--annotations``, ``gpuplan plan FLEET --base <base FLEET> --format github`` (the
change's disruptions and hand steps as workflow commands at the lines of fleet.yaml that cause
them, printed to stdout, where the runner makes them annotations on the pull request),
each as ``python -I -m gpuplan`` (gpuplan's own code, never the checkout's) in
an environment without credentials, and writes both as one Markdown document
to the job summary, a file, and/or one pull-request comment that is updated in
place on every push (found by a hidden marker and the token's own identity).
Disruptions come first and unfolded; only the capacity report is folded, and
cut to fit a comment. A failing command is reported in the document, never
hidden; the report itself never fails the job (``validate`` and ``check`` do).
A fleet or output path that is a symbolic link, or leads out of the
repository, is refused (and said so) in the pull request and on the base branch:
nothing outside the repository is read or quoted.

Standard library only, besides gpuplan itself.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MARKER = "<!-- gpuplan-pr-report -->"
# GitHub refuses comment bodies over 65,536 characters.
MAX_COMMENT = 65_000
# ... and a step's job summary over 1 MiB (bytes).
MAX_SUMMARY_BYTES = 1_000_000
# Comment pages read before giving up the search (and creating a comment).
MAX_PAGES = 30
PER_PAGE = 100
# Who writes the comment with the Actions GITHUB_TOKEN, for which GET /user answers 403.
ACTIONS_BOT = "github-actions[bot]"

# Environment variables that carry credentials. No child process gets them: only
# the comment request needs GITHUB_TOKEN, and the parent reads it once.
# (AUTH, but not AUTHOR: git's GIT_AUTHOR_* are harmless.)
_CREDENTIAL = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY|API_KEY|AUTH(?!OR(?:_|$))",
                         re.I)


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str


class Refused(Exception):
    """A fleet or output path the report will not read; the message says why."""


def child_env(environ: Mapping[str, str] | None = None, *, keep: tuple[str, ...] = ()) -> dict[str, str]:
    """`environ` (default: this process's) without credential variables, except `keep`."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k in keep or not _CREDENTIAL.search(k)}


def _git(*args: str, cwd: Path) -> str:
    # git is a trusted binary and may need the ssh agent to fetch the base branch, not a token
    return subprocess.run(("git", *args), cwd=cwd, check=True, capture_output=True, text=True,
                          env=child_env(keep=("SSH_AUTH_SOCK",))).stdout.strip()


def gpuplan_argv(*args: str) -> tuple[str, ...]:
    """gpuplan's own code: -I keeps the working directory (the pull request's
    checkout), PYTHON* variables and user site-packages off the import path."""
    return (sys.executable, "-I", "-m", "gpuplan", *args)


def _gpuplan(*args: str, cwd: Path) -> Run:
    proc = subprocess.run(gpuplan_argv(*args), cwd=cwd, capture_output=True, text=True, env=child_env())
    return Run(("gpuplan", *args), proc.returncode, proc.stdout, proc.stderr)


def resolve_base(ref: str, repo: Path) -> str:
    """The commit of `ref`: a local name or commit, else fetched from origin
    (actions/checkout clones one commit deep, without the base branch)."""
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo)
    except subprocess.CalledProcessError:
        _git("fetch", "--no-tags", "--depth=1", "origin", ref, cwd=repo)
        return _git("rev-parse", "--verify", "FETCH_HEAD^{commit}", cwd=repo)


@contextlib.contextmanager
def base_worktree(commit: str, repo: Path) -> Iterator[Path]:
    """The base commit checked out in a temporary worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="gpuplan-base-") as tmp:
        where = Path(tmp) / "base"
        _git("worktree", "add", "--detach", "--quiet", str(where), commit, cwd=repo)
        try:
            yield where
        finally:
            subprocess.run(("git", "worktree", "remove", "--force", str(where)), cwd=repo,
                           capture_output=True, check=False, env=child_env(keep=("SSH_AUTH_SOCK",)))


# --- paths: nothing outside the repository -------------------------------------------


def repo_relative(given: str, cwd: Path, top: Path) -> str:
    """`given` (relative to `cwd`) relative to the repository `top`, worked out
    lexically: never from a resolved path, which a symlink could lead anywhere.
    Raises Refused when it leaves the repository."""
    rel = os.path.relpath(os.path.normpath(os.path.join(cwd, given)), top)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise Refused(f"{_code(given)} is outside the repository")
    return rel


def check_inside(root: Path, rel: str, given: str, where: str) -> None:
    """Refuse `root/rel` when any component of it is a symlink or it resolves
    outside `root`: its lines would be quoted into the report. A missing path
    passes (gpuplan says it is missing, reading nothing)."""
    cur = root
    for part in Path(rel).parts:
        cur = cur / part
        try:
            mode = os.lstat(cur).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise Refused(f"{_code(given)} {where} cannot be examined ({exc.strerror or exc})") from None
        if stat.S_ISLNK(mode):
            how = ("is a symbolic link" if cur == root / rel
                   else f"is under a symbolic link ({_code(cur.relative_to(root).as_posix())})")
            raise Refused(f"{_code(given)} {where} {how}: the report reads nothing through a link, "
                          "which could lead outside the repository")
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(root / rel)]) != real_root:
        raise Refused(f"{_code(given)} {where} resolves outside the repository")


# --- the document --------------------------------------------------------------------


def _fence(text: str, info: str = "text") -> str:
    """A fenced block longer than any backtick run inside: the text cannot end it."""
    from gpuplan.report.markdown import md_fence

    return md_fence(text.rstrip(), info)


def _code(text: str) -> str:
    """An inline code span that nothing in `text` can end (a backtick run, a line break)."""
    from gpuplan.report.markdown import md_code

    return md_code(text)


def _failed(run: Run) -> str:
    return (f"{_code(' '.join(run.argv))} exited {run.code}:\n\n"
            + _fence(run.stderr.strip() or run.stdout.strip() or "(no output)"))


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")


class _Blocks:
    """What is open after each line of Markdown: a fenced code block, and
    `<details>` elements (as gpuplan's renderers write them, one tag a line)."""

    def __init__(self) -> None:
        self.fence = ""
        self.details = 0

    def feed(self, line: str) -> None:
        if self.fence:
            s = line.strip()
            if (len(line) - len(line.lstrip(" ")) <= 3 and s and set(s) == {self.fence[0]}
                    and len(s) >= len(self.fence)):
                self.fence = ""
            return
        m = _FENCE_OPEN.match(line)
        if m:
            self.fence = m.group(1)
            return
        low = line.strip().lower()
        # a tag a line, at its start: "</details>" quoted inside a line (a code span) is no tag
        if low.startswith("<details"):
            self.details += 1
        if low.startswith("</details>") and self.details:
            self.details -= 1

    def closers(self) -> list[str]:
        """Lines that close what is open, so that nothing after is swallowed."""
        out = [self.fence] if self.fence else []
        for _ in range(self.details):
            out += ["", "</details>"]
        return out


def closed(text: str) -> str:
    """`text` with whatever it leaves open (a fence, a `<details>`) closed: a part
    of the document cannot swallow, or fold away, the parts after it."""
    blocks = _Blocks()
    for line in text.split("\n"):
        blocks.feed(line)
    return "\n".join([text, *blocks.closers()]) if blocks.closers() else text


def heading_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each ATX heading outside fenced code."""
    blocks, out = _Blocks(), []
    for i, line in enumerate(text.split("\n")):
        if not blocks.fence and line.startswith("#"):
            out.append((i, line))
        blocks.feed(line)
    return out


def cut(text: str, limit: int, note: str) -> str:
    """`text` if it fits in `limit` characters, else its first whole lines, every
    fence and `<details>` they open closed, then `note` (with the count of lines
    left out): cut mid-table or mid-fold, nothing after it is swallowed."""
    text = text.rstrip("\n")
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    blocks, kept, size = _Blocks(), [], 0
    for line in lines:
        trial = _Blocks()
        trial.fence, trial.details = blocks.fence, blocks.details
        trial.feed(line)
        after = size + len(line) + 1
        tail = sum(len(x) + 1 for x in trial.closers()) + len(note) + 40
        if after + tail > limit:
            break
        kept.append(line)
        size, blocks = after, trial
    left = len(lines) - len(kept)
    return "\n".join([*kept, *blocks.closers(), "", f"*(… {left} more lines: {note})*"])


def split_plan(out: str) -> tuple[str, str, str]:
    """`gpuplan plan --base --format markdown` as (disruptive changes, change from
    base and what follows it, capacity report). The disruption table comes before
    the capacity report's `# ` heading; `## Change from base` and the migration
    steps after it. Output in another shape is all shown, none folded."""
    lines = out.rstrip("\n").split("\n")
    heads = heading_lines(out.rstrip("\n"))
    first = next((i for i, h in heads if h.startswith("# ")), None)
    # the first such heading: what follows it is shown, so nothing can fold the change away
    change = next((i for i, h in heads if re.match(r"## Change from base\b", h)), None)
    if change is None:
        return "", "\n".join(lines).strip(), ""
    if first is None or first > change:
        first = 0
    return ("\n".join(lines[:first]).strip(), "\n".join(lines[change:]).strip(),
            "\n".join(lines[first:change]).strip())


def _split_diff(out: str) -> tuple[str, str]:
    """`gpuplan diff --format markdown` as (its disruption block, the object diff)."""
    m = re.search(r"^\*\*gpuplan diff\*\*", out, re.M)
    if m is None:
        return "", out.strip()
    return out[:m.start()].strip(), out[m.start():].strip()


def render(*, fleet: str, base_ref: str, base_commit: str, plan: Run | str | None, diff: Run | str,
           max_chars: int | None = MAX_COMMENT) -> str:
    """The Markdown document: disruptive changes and the change from base first,
    then the objects, all unfolded; last the capacity report, folded in `<details>`,
    the only part cut to fit `max_chars` (unless the rest alone does not fit: then
    each part is cut to what the more important parts before it leave). `plan`
    None: no fleet on the base branch; a str: why a command was not run."""
    head = [MARKER, "## gpuplan: what this pull request does to the cluster", "",
            f"{_code(fleet)} against {_code(base_ref)} (`{base_commit[:12]}`).", ""]
    disruption = change = capacity = ""
    if plan is None:
        change = f"{_code(fleet)} does not exist on {_code(base_ref)}: everything below is new."
    elif isinstance(plan, str):
        change = f"**Not reported:** {plan}"
    elif plan.code != 0:
        change = _failed(plan)
    else:
        disruption, change, capacity = split_plan(plan.stdout)
    if isinstance(diff, str):
        objects = "**Not reported:** as above." if diff == plan else f"**Not reported:** {diff}"
    elif diff.code != 0:
        objects = _failed(diff)
    else:
        diff_disruption, objects = _split_diff(diff.stdout)
        if diff_disruption and diff_disruption != disruption:
            # from the tree the base branch deploys (not its spec): it can differ, so both are shown
            objects = diff_disruption + "\n\n" + objects
        elif diff_disruption:
            objects = "*(Disruptive changes: as listed above.)*\n\n" + objects
    parts = [closed(disruption), closed(change), closed(objects)]  # unfolded, the most important first
    capacity = closed(capacity)
    where = "see the job summary, or run `python -I -m gpuplan.pr_report --report FILE` locally for all of it"
    summary = "<details><summary>Capacity report of this pull request's spec</summary>"

    def assemble(shown: list[str], folded: str | None, tail: str = "") -> str:
        out = [*head, "### Disruption and capacity (`gpuplan plan --base`)", ""]
        out += [x for t in shown[:2] if t for x in (t, "")]
        out += ["### Generated objects (`gpuplan diff`)", "", shown[2], ""]
        if folded is not None:
            out += [summary, "", folded, "", "</details>", ""]
        if tail:
            out += [tail, ""]
        return "\n".join(out).rstrip() + "\n"

    whole = assemble(parts, capacity or None)
    if max_chars is None or len(whole) <= max_chars:
        return whole
    bare = assemble(parts, None)
    if capacity:
        room = max_chars - len(bare) - len(summary) - 30
        if room >= 1000:
            return assemble(parts, cut(capacity, room, f"the capacity report is cut here to fit; {where}"))
    tail = f"*(The capacity report does not fit here; {where}.)*" if capacity else ""
    if len(bare) + len(tail) + 2 <= max_chars:
        return assemble(parts, None, tail)
    # Too long even unfolded (thousands of drained nodes): each part is cut to what
    # the parts before it leave, keeping room for the cut notes of those after it.
    room = max_chars - len(assemble(["", "", ""], None, tail)) - 100
    kept = []
    for i, t in enumerate(parts):
        later = 300 * sum(1 for x in parts[i + 1:] if x)
        t = cut(t, max(room - later, 300), f"cut here to fit; {where}") if t else t
        kept.append(t)
        room -= len(t) + 2
    return assemble(kept, None, tail)


@dataclass(frozen=True)
class Collected:
    """What the report is rendered from (once per size: comment, summary, file)."""
    fleet: str
    base_ref: str
    base_commit: str
    plan: Run | str | None
    diff: Run | str
    # the runs that print GitHub Actions workflow commands (`annotations`), when asked for
    annotations: tuple[Run, ...] = ()

    def render(self, max_chars: int | None = MAX_COMMENT) -> str:
        return render(fleet=self.fleet, base_ref=self.base_ref, base_commit=self.base_commit,
                      plan=self.plan, diff=self.diff, max_chars=max_chars)


# What `collect(annotate=...)` may run besides the document: the new spec's diagnostics, and
# the change's disruptions and hand steps at the fleet.yaml lines that cause them (GP813, GP814)
ANNOTATE = ("diagnostics", "change")


def collect(fleet: str, output: str, base_ref: str, cwd: Path, *, fmt: str = "markdown",
            annotate: tuple[str, ...] = ()) -> Collected:
    """Check out `base_ref` and run plan and diff (in `fmt`), and the `annotate` runs (of
    ANNOTATE) in the github format, reading nothing through a symlink or outside the repository
    (in the pull request or on the base branch)."""
    top = Path(os.path.normpath(cwd / _git("rev-parse", "--show-cdup", cwd=cwd)))
    commit = resolve_base(base_ref, top)
    try:
        rel_fleet, rel_output = repo_relative(fleet, cwd, top), repo_relative(output, cwd, top)
        check_inside(top, rel_fleet, fleet, "in this pull request")
        check_inside(top, rel_output, output, "in this pull request")
    except Refused as exc:
        return Collected(fleet, base_ref, commit, str(exc), str(exc))
    plan: Run | str | None | Future[Run]
    diff: Run | str | Future[Run]
    notes: list[Future[Run]] = []
    # plan and diff are independent: run side by side
    with base_worktree(commit, top) as base, ThreadPoolExecutor(2) as pool:
        try:
            check_inside(base, rel_fleet, fleet, f"on {_code(base_ref)}")
        except Refused as exc:
            plan = str(exc)
        else:
            # the base path is the pull request's, relative and unresolved, replayed in the worktree
            base_fleet = base / rel_fleet
            plan = (pool.submit(_gpuplan, "plan", rel_fleet, "--base", str(base_fleet), "--format", fmt,
                                cwd=top)
                    if base_fleet.is_file() else None)
            if "change" in annotate and plan is not None:
                notes.append(pool.submit(_gpuplan, "plan", rel_fleet, "--base", str(base_fleet),
                                         "--format", "github", cwd=top))
        if "diagnostics" in annotate:
            notes.insert(0, pool.submit(_gpuplan, "validate", rel_fleet, "--format", "github", cwd=top))
        try:
            check_inside(base, rel_output, output, f"on {_code(base_ref)}")
        except Refused as exc:
            diff = str(exc)
        else:
            diff = pool.submit(_gpuplan, "diff", rel_fleet, "-o", rel_output, "--old", str(base / rel_output),
                               "--format", fmt, cwd=top)
        plan = plan.result() if isinstance(plan, Future) else plan
        diff = diff.result() if isinstance(diff, Future) else diff
        runs = tuple(f.result() for f in notes)
    return Collected(fleet, base_ref, commit, plan, diff, runs)


def annotations(c: Collected) -> str:
    """The workflow commands of the `annotate` runs: gpuplan's GitHub reporter wrote every line
    (``gpuplan.reporters.github``), so nothing a spec or tree holds can start a command of its
    own. A run that fails prints none (its failure is in the document); the lines it did print stay."""
    return "".join(line + "\n" for r in c.annotations for line in r.stdout.splitlines() if line.startswith("::"))


def _failed_text(run: Run) -> str:
    """:func:`_failed` in plain text."""
    return f"{' '.join(run.argv)} exited {run.code}:\n" + (run.stderr.strip() or run.stdout.strip() or "(no output)")


def render_text(c: Collected) -> str:
    """The review in plain text, in the Markdown document's order: what the change does to the
    cluster (disruptions, hand steps, the change from base), the generated objects, then capacity."""
    head = f"gpuplan review: {c.fleet} against {c.base_ref} ({c.base_commit[:12]})"
    out = [head, "=" * len(head), ""]

    def section(title: str, body: str) -> None:
        out.extend([title, "-" * len(title), body.strip() or "(nothing)", ""])

    capacity = disruption = ""
    if c.plan is None:
        section("What the change does to the cluster", f"{c.fleet} does not exist on {c.base_ref}: everything is new.")
    elif isinstance(c.plan, str):
        section("What the change does to the cluster", f"Not reported: {c.plan}")
    elif c.plan.code != 0:
        section("What the change does to the cluster", _failed_text(c.plan))
    else:
        # plan --base in text: the disruptions, the capacity report, then the change from base
        changes, sep, capacity = c.plan.stdout.partition("\nCapacity: ")
        capacity, csep, change = (("Capacity: " + capacity) if sep else "").partition("\nChange from base (")
        section("What the change does to the cluster",
                changes.strip() + (("\n\nChange from base (" + change) if csep else ""))
        disruption = changes.strip()
    if isinstance(c.diff, str):
        section("Generated objects", f"Not reported: {c.diff}")
    elif c.diff.code != 0:
        section("Generated objects", _failed_text(c.diff))
    else:
        m = re.search(r"^\d+ added, \d+ removed", c.diff.stdout, re.M)
        head, objects = (c.diff.stdout[:m.start()], c.diff.stdout[m.start():]) if m else ("", c.diff.stdout)
        if head.strip() and head.strip() == disruption:
            head = "(Disruptive changes: as listed above.)\n\n"  # from the tree REF deploys: the same
        section("Generated objects", head + objects)
    if capacity:
        section("Capacity after the change", capacity)
    return "\n".join(out).rstrip() + "\n"


def failed(c: Collected) -> bool:
    """A command of the review did not run to its end (an invalid spec on either side, a refused path)."""
    return any(isinstance(r, str) or (isinstance(r, Run) and r.code != 0) for r in (c.plan, c.diff))


def report(fleet: str, output: str, base_ref: str, cwd: Path, *, max_chars: int | None = MAX_COMMENT) -> str:
    """The Markdown document of the pull request checked out at `cwd`."""
    return collect(fleet, output, base_ref, cwd).render(max_chars)


def fit_summary(c: Collected) -> str:
    """The document as large as a job summary takes (its limit is in bytes)."""
    limit = MAX_SUMMARY_BYTES
    while True:
        text = c.render(limit)
        size = len(text.encode("utf-8"))
        if size <= MAX_SUMMARY_BYTES or limit <= MAX_COMMENT:
            return text
        limit = max(MAX_COMMENT, limit * MAX_SUMMARY_BYTES // size - 1000)


# --- the pull-request comment ------------------------------------------------------


def _api(method: str, url: str, token: str, body: dict | None = None) -> object:
    """The decoded JSON answer; ValueError when it is not JSON."""
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Accept": "application/vnd.github+json",
                                          "X-GitHub-Api-Version": "2022-11-28",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def token_login(api_url: str, token: str) -> str:
    """Whose comments are ours: the token's user (GET /user), else the Actions bot,
    for the Actions GITHUB_TOKEN is refused GET /user (403)."""
    try:
        user = _api("GET", f"{api_url.rstrip('/')}/user", token)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return ACTIONS_BOT
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) and login else ACTIONS_BOT


def _ours(comment: object, login: str) -> int | None:
    """The id of `comment` when it is the report's comment: written by `login`
    (anyone else's comment with the marker is left alone) and well formed."""
    if not isinstance(comment, dict):
        return None
    cid, body, user = comment.get("id"), comment.get("body"), comment.get("user")
    if not (isinstance(cid, int) and not isinstance(cid, bool) and cid > 0):
        return None
    if not (isinstance(body, str) and body.startswith(MARKER)):
        return None
    return cid if isinstance(user, dict) and user.get("login") == login else None


def find_comment(issues: str, number: int, token: str, login: str) -> int | None:
    """The report's comment on pull request `number`: at most MAX_PAGES pages
    (an API that keeps answering full pages is not paged for ever); an answer
    that is not a list of comments ends the search (a new comment is made)."""
    for page in range(1, MAX_PAGES + 1):
        try:
            comments = _api("GET", f"{issues}/{number}/comments?per_page={PER_PAGE}&page={page}", token)
        except ValueError:  # not JSON
            return None
        if not isinstance(comments, list):
            return None
        for c in comments:
            cid = _ours(c, login)
            if cid is not None:
                return cid
        if len(comments) < PER_PAGE:
            return None
    return None


def post_comment(body: str, *, api_url: str, repository: str, number: int, token: str) -> str:
    """Update the pull request's gpuplan comment (the token's own, with MARKER) or
    create it. Returns "updated" or "created"."""
    issues = f"{api_url.rstrip('/')}/repos/{repository}/issues"
    cid = find_comment(issues, number, token, token_login(api_url, token))
    if cid is not None:
        _write("PATCH", f"{issues}/comments/{cid}", token, body)
        return "updated"
    _write("POST", f"{issues}/{number}/comments", token, body)
    return "created"


def _write(method: str, url: str, token: str, body: str) -> None:
    try:
        _api(method, url, token, {"body": body})
    except ValueError:  # a 2xx answer that is not JSON: written all the same
        pass


def _pr_number(event_path: str | None) -> int | None:
    if not event_path:
        return None
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    number = (event.get("pull_request") or {}).get("number") if isinstance(event, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    # read once, here; the children get an environment without it (child_env)
    token = env.get("GITHUB_TOKEN")
    ap = argparse.ArgumentParser(prog="python -I -m gpuplan.pr_report", description=__doc__.split("\n")[0])
    ap.add_argument("--fleet", default="fleet.yaml")
    ap.add_argument("--output", default="generated", help="the generated tree")
    ap.add_argument("--base-ref", default=env.get("GITHUB_BASE_REF") or None,
                    help="branch or commit to compare with (default: $GITHUB_BASE_REF)")
    ap.add_argument("--summary", default=env.get("GITHUB_STEP_SUMMARY") or None,
                    help="append the report here (default: $GITHUB_STEP_SUMMARY)")
    ap.add_argument("--report", default=None, help="also write the report to this file (whole, never cut)")
    ap.add_argument("--annotations", action="store_true",
                    help="print the change's disruptions and hand steps as GitHub Actions annotations at the "
                         "fleet.yaml lines that cause them (the spec's diagnostics: `gpuplan validate --format github`)")
    ap.add_argument("--comment", action="store_true",
                    help="post it as a pull-request comment, updated in place "
                         "($GITHUB_TOKEN, $GITHUB_REPOSITORY, $GITHUB_EVENT_PATH, $GITHUB_API_URL)")
    args = ap.parse_args(argv)
    if not args.base_ref:
        print("gpuplan pr-report: no base branch (not a pull request, and no --base-ref): nothing to report",
              file=sys.stderr)
        return 0
    try:
        collected = collect(args.fleet, args.output, args.base_ref, Path.cwd(),
                            annotate=("change",) if args.annotations else ())
    except subprocess.CalledProcessError as exc:
        print(f"gpuplan pr-report: git {' '.join(exc.cmd[1:])} failed: {(exc.stderr or '').strip()}",
              file=sys.stderr)
        return 1
    comment = collected.render(MAX_COMMENT)
    sys.stdout.write(annotations(collected))
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as fh:
            fh.write(fit_summary(collected))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(collected.render(None))
    if not (args.summary or args.report or args.comment):
        sys.stdout.write(collected.render(None))
    if args.comment:
        number = _pr_number(env.get("GITHUB_EVENT_PATH"))
        repository = env.get("GITHUB_REPOSITORY")
        if number is None or not token or not repository:
            print("gpuplan pr-report: not commenting: needs a pull_request event, GITHUB_TOKEN and "
                  "GITHUB_REPOSITORY", file=sys.stderr)
            return 0
        try:
            how = post_comment(comment, api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
                               repository=repository, number=number, token=token)
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            # a fork's pull request gets a read-only token: the job summary still has the report
            why = str(exc).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            print(f"::warning title=gpuplan::could not comment on pull request #{number} ({why}); "
                  "the report is in the job summary")
            return 0
        print(f"gpuplan pr-report: {how} the comment on pull request #{number}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
