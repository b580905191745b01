"""The pull-request report of the GitHub Action: what a spec change does to the cluster.

    python -m gpuplan.pr_report [--fleet fleet.yaml] [--output generated] [--base-ref main]
                                [--summary FILE] [--report FILE] [--comment]

Checks the base branch out beside the work tree (``git worktree``), then runs

- ``gpuplan plan FLEET --base <base FLEET> --format markdown``: the disruption
  report (nodes drained for a MIG change, removed tiers and tenants,
  PriorityClass changes) and the capacity report, and
- ``gpuplan diff FLEET -o OUTPUT --old <base OUTPUT> --format markdown``: every
  object the pull request adds, removes or changes against the tree the base
  branch deploys today,

and writes both as one Markdown document to the job summary, a file, and/or
one pull-request comment that is updated in place on every push (found by a
hidden marker). A failing command is reported in the document, never hidden;
the report itself never fails the job (``validate`` and ``check`` do).

Standard library only, besides gpuplan itself run as ``python -m gpuplan``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MARKER = "<!-- gpuplan-pr-report -->"
# GitHub refuses comment bodies over 65,536 characters.
MAX_COMMENT = 65_000
_CHANGE_HEADING = re.compile(r"^## Change from base\b.*$", re.M)


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(("git", *args), cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _gpuplan(*args: str, cwd: Path) -> Run:
    proc = subprocess.run((sys.executable, "-m", "gpuplan", *args), cwd=cwd, capture_output=True, text=True)
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
                           capture_output=True, check=False)


def _fence(text: str, info: str = "text") -> str:
    """A fenced block longer than any backtick run inside: the text cannot end it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def _failed(run: Run) -> str:
    return (f"`{' '.join(run.argv)}` exited {run.code}:\n\n"
            + _fence(run.stderr.strip() or run.stdout.strip() or "(no output)"))


def _plan_section(run: Run) -> list[str]:
    if run.code != 0:
        return [_failed(run)]
    m = _CHANGE_HEADING.search(run.stdout)
    if m is None:  # no change section: show the whole report
        return [run.stdout.rstrip()]
    change = run.stdout[m.end():].strip()
    capacity = run.stdout[:m.start()].strip()
    return [change, "", "<details><summary>Capacity report of this pull request's spec</summary>", "",
            capacity, "", "</details>"]


def render(*, fleet: str, base_ref: str, base_commit: str, plan: Run | None, diff: Run,
           max_chars: int = MAX_COMMENT) -> str:
    """The Markdown document: disruption first, then objects, then capacity."""
    head = [MARKER, "## gpuplan: what this pull request does to the cluster", "",
            f"`{fleet}` against `{base_ref}` (`{base_commit[:12]}`).", ""]
    body = ["### Disruption and capacity (`gpuplan plan --base`)", ""]
    if plan is None:
        body += [f"`{fleet}` does not exist on `{base_ref}`: everything below is new.", ""]
    else:
        body += [*_plan_section(plan), ""]
    objects = ["### Generated objects (`gpuplan diff`)", "",
               (diff.stdout.rstrip() if diff.code == 0 else _failed(diff)), ""]
    text = "\n".join(head + body + objects)
    if len(text) > max_chars:
        # the object diff cuts itself below GitHub's limit; fold the plan output to fit beside it
        note = "*(the capacity report is cut here to fit a comment; the job summary has it whole)*"
        room = max_chars - len("\n".join(head + objects)) - len(note) - 200
        cut = "\n".join(body)[:max(room, 0)]
        text = "\n".join(head + [cut, "", note, ""] + objects)
    return text.rstrip() + "\n"


def report(fleet: str, output: str, base_ref: str, cwd: Path) -> str:
    """Check out `base_ref`, run plan and diff, return the Markdown document."""
    top = Path(_git("rev-parse", "--show-toplevel", cwd=cwd))
    rel_fleet = os.path.relpath((cwd / fleet).resolve(), top)
    rel_output = os.path.relpath((cwd / output).resolve(), top)
    commit = resolve_base(base_ref, top)
    with base_worktree(commit, top) as base:
        base_fleet = base / rel_fleet
        plan = (_gpuplan("plan", fleet, "--base", str(base_fleet), "--format", "markdown", cwd=cwd)
                if base_fleet.is_file() else None)
        diff = _gpuplan("diff", fleet, "-o", output, "--old", str(base / rel_output), "--format", "markdown",
                        cwd=cwd)
    return render(fleet=fleet, base_ref=base_ref, base_commit=commit, plan=plan, diff=diff)


# --- the pull-request comment ------------------------------------------------------


def _api(method: str, url: str, token: str, body: dict | None = None) -> object:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Accept": "application/vnd.github+json",
                                          "X-GitHub-Api-Version": "2022-11-28",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def post_comment(body: str, *, api_url: str, repository: str, number: int, token: str) -> str:
    """Update the pull request's gpuplan comment (found by MARKER) or create it.
    Returns "updated" or "created"."""
    base = f"{api_url.rstrip('/')}/repos/{repository}/issues"
    page = 1
    while True:
        comments = _api("GET", f"{base}/{number}/comments?per_page=100&page={page}", token)
        if not isinstance(comments, list) or not comments:
            break
        for c in comments:
            if isinstance(c, dict) and MARKER in str(c.get("body", "")):
                _api("PATCH", f"{base}/comments/{c['id']}", token, {"body": body})
                return "updated"
        page += 1
    _api("POST", f"{base}/{number}/comments", token, {"body": body})
    return "created"


def _pr_number(event_path: str | None) -> int | None:
    if not event_path:
        return None
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    number = (event.get("pull_request") or {}).get("number") if isinstance(event, dict) else None
    return number if isinstance(number, int) else None


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    ap = argparse.ArgumentParser(prog="python -m gpuplan.pr_report", description=__doc__.split("\n")[0])
    ap.add_argument("--fleet", default="fleet.yaml")
    ap.add_argument("--output", default="generated", help="the generated tree")
    ap.add_argument("--base-ref", default=env.get("GITHUB_BASE_REF") or None,
                    help="branch or commit to compare with (default: $GITHUB_BASE_REF)")
    ap.add_argument("--summary", default=env.get("GITHUB_STEP_SUMMARY") or None,
                    help="append the report here (default: $GITHUB_STEP_SUMMARY)")
    ap.add_argument("--report", default=None, help="also write the report to this file")
    ap.add_argument("--comment", action="store_true",
                    help="post it as a pull-request comment, updated in place "
                         "($GITHUB_TOKEN, $GITHUB_REPOSITORY, $GITHUB_EVENT_PATH, $GITHUB_API_URL)")
    args = ap.parse_args(argv)
    if not args.base_ref:
        print("gpuplan pr-report: no base branch (not a pull request, and no --base-ref): nothing to report",
              file=sys.stderr)
        return 0
    try:
        text = report(args.fleet, args.output, args.base_ref, Path.cwd())
    except subprocess.CalledProcessError as exc:
        print(f"gpuplan pr-report: git {' '.join(exc.cmd[1:])} failed: {(exc.stderr or '').strip()}",
              file=sys.stderr)
        return 1
    for dest in (args.summary, args.report):
        if dest:
            with open(dest, "a" if dest == args.summary else "w", encoding="utf-8") as fh:
                fh.write(text)
    if not (args.summary or args.report or args.comment):
        sys.stdout.write(text)
    if args.comment:
        number = _pr_number(env.get("GITHUB_EVENT_PATH"))
        token, repository = env.get("GITHUB_TOKEN"), env.get("GITHUB_REPOSITORY")
        if number is None or not token or not repository:
            print("gpuplan pr-report: not commenting: needs a pull_request event, GITHUB_TOKEN and "
                  "GITHUB_REPOSITORY", file=sys.stderr)
            return 0
        try:
            how = post_comment(text, api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
                               repository=repository, number=number, token=token)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            # a fork's pull request gets a read-only token: the job summary still has the report
            why = str(exc).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            print(f"::warning title=gpuplan::could not comment on pull request #{number} ({why}); "
                  "the report is in the job summary")
            return 0
        print(f"gpuplan pr-report: {how} the comment on pull request #{number}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
