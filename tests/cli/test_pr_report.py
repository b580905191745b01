"""The Action's pull-request report: a real git repository, a real base branch,
real `gpuplan plan --base` and `gpuplan diff` runs, a real HTTP exchange for the
comment (a local server speaking the GitHub issue-comments API)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from gpuplan import pr_report
from gpuplan.pr_report import MARKER, Run, render
from tests.conftest import REPO

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(("git", *args), cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def _build(repo: Path) -> None:
    r = subprocess.run((sys.executable, "-m", "gpuplan", "build", "fleet.yaml"), cwd=repo,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _changed_spec(text: str) -> str:
    """Remove tenant `research` (and its namespace), change the inference pool's MIG layout
    (dropping 2g.20gb and the tier that used it), and raise a tier's priority."""
    text = text.replace("layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", "layout: {3g.40gb: 1, 1g.10gb: 4}")
    text = text.replace("    - name: inference-medium\n      pool: infer-a100\n      profile: 2g.20gb\n"
                        "      workload: inference\n      priority: 300000\n", "")
    text = text.replace("inference-medium: 6, ", "")
    text = text.replace("      priority: 1000\n", "      priority: 2000\n")
    return text[:text.index("    - name: research\n")]


@pytest.fixture
def pr_repo(tmp_path, monkeypatch) -> Path:
    """A fleet repository: `main` has the example fleet and its tree; the checked-out
    branch `change` has the changed spec, rebuilt and committed (as CI sees a PR)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    repo = tmp_path / "fleet-repo"
    repo.mkdir()
    original = (REPO / "examples" / "fleet.yaml").read_text()
    (repo / "fleet.yaml").write_text(original)
    _git(repo, "init", "-q", "-b", "main")
    _build(repo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "change")
    changed = _changed_spec(original)
    assert changed != original and "research" not in changed
    (repo / "fleet.yaml").write_text(changed)
    _build(repo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "change")
    return repo


@pytest.mark.slow
def test_report_shows_disruption_and_objects(pr_repo):
    text = pr_report.report("fleet.yaml", "generated", "main", pr_repo)
    assert text.startswith(MARKER + "\n")
    disruption, rest = text.split("### Generated objects (`gpuplan diff`)")
    objects, capacity = rest.split("<details><summary>Capacity report")
    # the MIG change drains both inference nodes, GPU by GPU
    for node in ("gpu-a100-05", "gpu-a100-06"):
        assert (f"- node {node} (pool infer-a100): GPUs 0, 1, 2, 3 change MIG state — drained: "
                "every GPU {1g.10gb: 2, 2g.20gb: 1, 3g.40gb: 1} -> every GPU {1g.10gb: 4, 3g.40gb: 1}") in disruption
    assert "tier notebooks: PriorityClass 1000/Never -> 2000/Never" in disruption
    assert "| tenant | research | removed |" in disruption
    assert "| tier | inference-medium | removed |" in disruption
    # the plan's own disruption table, before the objects and not folded with the capacity report
    assert "| **destructive** | Namespace research-notebooks |" in disruption
    assert "| **drain** | node gpu-a100-05 (pool infer-a100) |" in disruption
    assert "## Pools" in capacity and "## Pools" not in disruption  # the full report is folded
    # the object diff is against the tree main deploys: the namespace Argo CD will prune
    assert "| Namespace |  | `research-notebooks` | `tenants/research/namespaces.yaml` |" in objects
    assert "| ResourceQuota | `research-notebooks` | `gpuplan-gpus` |" in objects
    assert "| PriorityClass.scheduling.k8s.io |  | `gpuplan-inference-medium` |" in objects
    assert "| ConfigMap | `gpu-operator` | `gpuplan-mig-parted-config` |" in objects
    # the layout change renames the content-addressed mig-parted config: the new key comes in, and
    # the old one stays, for the static nodes that carry it until their NodeFeatureRule (wave 1)
    assert re.search(r'\.mig-configs\.gpuplan-infer-a100-[0-9a-f]{8}: \+ \[', objects)
    assert not re.search(r'\.mig-configs\.gpuplan-infer-a100-[0-9a-f]{8}: - \[', objects)
    # the diff's disruption table differs from the plan's only where the tree cannot tell what the
    # spec can: a removed tier's resource (the diff lists what its class could hold, "at most one
    # of"), so both are shown (equal tables are said once: "as listed above")
    assert "Disruptive changes: as listed above." not in objects
    assert "tier inference-medium leaves the tree" in objects and "at most one of:" in objects
    assert "at most one of:" not in disruption
    # headers name the spec as the PR's tree does: unchanged files are not reported changed
    assert "50-gpuplan-topology.conf" not in objects
    # the base worktree is gone again
    assert _git(pr_repo, "worktree", "list").count("\n") == 1


@pytest.mark.slow
def test_base_branch_is_fetched_into_a_shallow_clone(pr_repo, tmp_path):
    """As actions/checkout leaves it: one commit deep, no base branch; the report fetches it."""
    clone = tmp_path / "ci-checkout"
    _git(tmp_path, "clone", "-q", "--depth=1", "--branch=change", f"file://{pr_repo}", str(clone))
    assert "main" not in _git(clone, "branch", "-a")
    text = pr_report.report("fleet.yaml", "generated", "main", clone)
    assert "- node gpu-a100-05 (pool infer-a100): GPUs 0, 1, 2, 3 change MIG state" in text
    assert "| Namespace |  | `research-notebooks` |" in text
    assert _git(pr_repo, "rev-parse", "main")[:12] in text


@pytest.mark.slow
def test_base_without_fleet_reports_everything_new(pr_repo):
    _git(pr_repo, "checkout", "-q", "--orphan", "empty")
    _git(pr_repo, "rm", "-rq", "--cached", ".")
    _git(pr_repo, "commit", "-q", "--allow-empty", "-m", "empty")
    _git(pr_repo, "checkout", "-q", "-f", "change")
    text = pr_report.report("fleet.yaml", "generated", "empty", pr_repo)
    assert "`fleet.yaml` does not exist on `empty`" in text
    assert "| Namespace |  | `research-notebooks` |" not in text
    assert "**gpuplan diff**: " in text and " added, 0 removed, 0 changed" in text


def test_failing_command_is_shown_not_hidden():
    plan = Run(("gpuplan", "plan"), 1, "", "fleet.yaml:3:1: error[GP101]: ```unknown``` key\n")
    diff = Run(("gpuplan", "diff"), 0, "**gpuplan diff**: 0 added\n", "")
    text = render(fleet="fleet.yaml", base_ref="main", base_commit="0" * 40, plan=plan, diff=diff)
    assert "`gpuplan plan` exited 1:" in text
    # a fence longer than any backtick run in the message: the message cannot close it
    assert "````text\nfleet.yaml:3:1: error[GP101]: ```unknown``` key\n````" in text


def test_long_report_fits_a_comment():
    plan = Run(("gpuplan", "plan"), 0, "# Capacity\n" + "x" * 80_000 + "\n## Change from base (a → b)\n- drained\n", "")
    diff = Run(("gpuplan", "diff"), 0, "**gpuplan diff**: 1 changed\n", "")
    text = render(fleet="f.yaml", base_ref="main", base_commit="0" * 40, plan=plan, diff=diff)
    assert len(text) <= pr_report.MAX_COMMENT
    assert "- drained" in text and "**gpuplan diff**: 1 changed" in text
    assert "the capacity report is cut here" in text


BOT = "github-actions[bot]"


class _FakeGitHub(BaseHTTPRequestHandler):
    """The issue-comments API, and GET /user: 403 when `login` is None (as for the
    Actions GITHUB_TOKEN, whose comments are github-actions[bot]'s), else that user."""

    comments: list[dict] = []
    calls: list[tuple[str, str, str | None]] = []
    login: str | None = None
    # page number -> raw body of the comment listing, instead of `comments` (a staticmethod)
    listing = None

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reply(self, status: int, payload) -> None:
        self._send(status, json.dumps(payload).encode())

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self):  # noqa: N802
        self.calls.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path == "/user":
            if self.login is None:
                self._reply(403, {"message": "Resource not accessible by integration"})
            else:
                self._reply(200, {"login": self.login, "type": "User"})
            return
        page = int(parse_qs(urlsplit(self.path).query)["page"][0])
        if self.listing is not None:
            self._send(200, self.listing(page))
        else:
            self._reply(200, self.comments[(page - 1) * 100:page * 100])

    def do_POST(self):  # noqa: N802
        self.calls.append(("POST", self.path, self.headers.get("Authorization")))
        author = {"login": self.login, "type": "User"} if self.login else {"login": BOT, "type": "Bot"}
        self.comments.append({"id": 1000 + len(self.comments), "body": self._body()["body"], "user": author})
        self._reply(201, self.comments[-1])

    def do_PATCH(self):  # noqa: N802
        self.calls.append(("PATCH", self.path, self.headers.get("Authorization")))
        cid = int(self.path.rsplit("/", 1)[1])
        body = self._body()["body"]
        for c in self.comments:
            if c["id"] == cid:
                c["body"] = body
        self._reply(200, {"id": cid, "body": body})

    def log_message(self, *args):
        pass



@pytest.fixture
def github():
    """The fake API on 127.0.0.1, reset: its base URL."""
    _FakeGitHub.comments, _FakeGitHub.calls, _FakeGitHub.login, _FakeGitHub.listing = [], [], None, None
    server = HTTPServer(("127.0.0.1", 0), _FakeGitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _post(github: str, body: str = MARKER + "\nthe report") -> str:
    return pr_report.post_comment(body, api_url=github, repository="acme/gpu-fleet", number=42, token="t0ken")


def _writes() -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in _FakeGitHub.calls if m != "GET"]


@pytest.mark.slow
def test_comment_is_created_then_updated_in_place(pr_repo, tmp_path, monkeypatch, capsys, github):
    _FakeGitHub.comments = [{"id": 7, "body": "LGTM", "user": {"login": "alice", "type": "User"}}]
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42}}))
    summary = tmp_path / "summary.md"
    monkeypatch.chdir(pr_repo)
    monkeypatch.setenv("GITHUB_API_URL", github)
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/gpu-fleet")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert pr_report.main(["--comment"]) == 0
    assert pr_report.main(["--comment"]) == 0
    methods = [(m, p) for m, p, _ in _FakeGitHub.calls]
    assert ("POST", "/repos/acme/gpu-fleet/issues/42/comments") in methods
    assert methods[-1] == ("PATCH", "/repos/acme/gpu-fleet/issues/comments/1001")
    assert {auth for _, _, auth in _FakeGitHub.calls} == {"Bearer t0ken"}
    assert len(_FakeGitHub.comments) == 2  # the other comment, and one gpuplan comment
    ours = _FakeGitHub.comments[1]["body"]
    assert ours.startswith(MARKER) and "change MIG state — drained" in ours and "`research-notebooks`" in ours
    # the job summary got the same report on each run
    assert summary.read_text() == ours * 2
    err = capsys.readouterr().err
    assert "created the comment on pull request #42" in err and "updated the comment" in err


@pytest.mark.slow
def test_someone_elses_marker_comment_is_left_alone(github):
    """A participant who pastes the marker can neither take the report over nor
    have it overwrite (or suppress) their comment."""
    planted = {"id": 5, "body": MARKER + "\nNothing disruptive here, merge away.",
               "user": {"login": "mallory", "type": "User"}}
    _FakeGitHub.comments = [dict(planted)]
    assert _post(github) == "created"
    assert _post(github, MARKER + "\nsecond push") == "updated"
    assert _writes() == [("POST", "/repos/acme/gpu-fleet/issues/42/comments"),
                         ("PATCH", "/repos/acme/gpu-fleet/issues/comments/1001")]
    assert _FakeGitHub.comments[0] == planted
    assert _FakeGitHub.comments[1]["body"] == MARKER + "\nsecond push"


def test_comment_is_the_token_users_own(github):
    """A user token (GET /user answers): its login's comment, not the Actions bot's."""
    _FakeGitHub.login = "fleet-ci"
    _FakeGitHub.comments = [{"id": 5, "body": MARKER + "\nold", "user": {"login": BOT, "type": "Bot"}},
                            {"id": 6, "body": MARKER + "\nold", "user": {"login": "fleet-ci", "type": "User"}}]
    assert _post(github) == "updated"
    assert _writes() == [("PATCH", "/repos/acme/gpu-fleet/issues/comments/6")]
    assert ("GET", "/user") in [(m, p) for m, p, _ in _FakeGitHub.calls]


@pytest.mark.slow
@pytest.mark.parametrize("answer", [
    b"<html>rate limited</html>",
    json.dumps({"message": "Not Found"}).encode(),
    json.dumps([1, None, "x"]).encode(),
    json.dumps([{"body": MARKER, "user": {"login": BOT}}]).encode(),  # no id
    json.dumps([{"id": "5", "body": MARKER, "user": {"login": BOT}}]).encode(),
    json.dumps([{"id": True, "body": MARKER, "user": {"login": BOT}}]).encode(),
    json.dumps([{"id": 5, "body": [MARKER], "user": {"login": BOT}}]).encode(),
    json.dumps([{"id": 5, "body": MARKER, "user": BOT}]).encode(),
], ids=["not-json", "not-a-list", "not-objects", "no-id", "str-id", "bool-id", "list-body", "str-user"])
def test_malformed_listing_means_create(github, answer):
    _FakeGitHub.listing = staticmethod(lambda page: answer if page == 1 else b"[]")
    assert _post(github) == "created"
    assert _writes() == [("POST", "/repos/acme/gpu-fleet/issues/42/comments")]


@pytest.mark.slow
def test_paging_is_bounded(github):
    """An API that answers every page full (of other comments) is read MAX_PAGES pages deep."""
    full = json.dumps([{"id": i + 1, "body": "LGTM", "user": {"login": "alice"}} for i in range(100)]).encode()
    _FakeGitHub.listing = staticmethod(lambda page: full if page <= 10 * pr_report.MAX_PAGES else b"[]")
    assert _post(github) == "created"
    pages = [p for m, p, _ in _FakeGitHub.calls if m == "GET" and "/comments" in p]
    assert len(pages) == pr_report.MAX_PAGES == 30
    assert _writes() == [("POST", "/repos/acme/gpu-fleet/issues/42/comments")]


def test_not_a_pull_request_is_a_quiet_no_op(monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    assert pr_report.main([]) == 0
    assert "nothing to report" in capsys.readouterr().err


@pytest.mark.slow
def test_review_is_one_command_with_the_change_first(pr_repo):
    """`gpuplan review --base main`: the same collected runs as the pull-request report, in
    text: what the change does to the cluster, then the objects, then capacity."""
    r = subprocess.run((sys.executable, "-m", "gpuplan", "review", "--base", "main"), cwd=pr_repo,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    heads = [ln for ln in out.splitlines() if ln in ("What the change does to the cluster", "Generated objects",
                                                      "Capacity after the change")]
    assert heads == ["What the change does to the cluster", "Generated objects", "Capacity after the change"]
    cluster, rest = out.split("\nGenerated objects\n")
    objects, capacity = rest.split("\nCapacity after the change\n")
    assert "DISRUPTIVE CHANGES" in cluster and "pool infer-a100:" in cluster
    assert "Change from base" in cluster and "Change from base" not in capacity
    assert " removed, " in objects and "~ PriorityClass.scheduling.k8s.io gpuplan-notebooks" in objects
    assert capacity.lstrip("-\n").startswith("Capacity: ")
    md = subprocess.run((sys.executable, "-m", "gpuplan", "review", "--base", "main", "--format", "markdown"),
                        cwd=pr_repo, capture_output=True, text=True)
    assert md.returncode == 0 and md.stdout == pr_report.report("fleet.yaml", "generated", "main", pr_repo,
                                                                 max_chars=None)
    bad = subprocess.run((sys.executable, "-m", "gpuplan", "review", "--base", "no-such-ref"), cwd=pr_repo,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no-such-ref" in bad.stderr and not bad.stdout
