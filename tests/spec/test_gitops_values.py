"""gitops.repoURL, revision and path are checked before they reach the delivery objects."""

from __future__ import annotations

import pytest

from tests.rules.helpers import BASE, edit, position

GITOPS = "      repoURL: https://git.example.com/fleet.git\n"


def _spec(url="https://git.example.com/fleet.git", revision=None, path=None) -> str:
    text = edit(BASE, GITOPS, f"      repoURL: {url!r}\n".replace("'", '"') + "")
    if revision is not None:
        text = edit(text, "      repoURL:", f'      revision: "{revision}"\n      repoURL:')
    if path is not None:
        text = edit(text, "      repoURL:", f'      path: "{path}"\n      repoURL:')
    return text


def _check(tmp_path, text):
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(text, encoding="utf-8")
    return [d for d in check_fleet(p).diagnostics if d.is_error]


@pytest.mark.parametrize("url", ["git.example.com/fleet.git", "https://git.example.com/my fleet.git",
                                 "ftp://git.example.com/f.git", "https://", "fleet", "file:///etc/passwd",
                                 "https://git.example.com/f.git\\n::warning::x"])
def test_bad_repo_url(tmp_path, url):
    text = _spec(url=url)
    errors = _check(tmp_path, text)
    assert [d.code for d in errors] == ["GP116"]
    assert (errors[0].line, errors[0].col) == position(text, '"' + url[:10])
    assert "https://" in errors[0].hint


@pytest.mark.parametrize("url", ["https://git.example.com/platform/gpu-fleet.git", "ssh://git@github.com/o/r.git",
                                 "git@github.com:org/repo.git", "http://gitea.local:3000/o/r"])
def test_good_repo_url(tmp_path, url):
    assert _check(tmp_path, _spec(url=url)) == []


@pytest.mark.parametrize("path", ["../generated", "/generated", "a/../../b", "gen erated", "a\\\\b"])
def test_bad_path(tmp_path, path):
    text = _spec(path=path)
    errors = _check(tmp_path, text)
    assert [d.code for d in errors] == ["GP116"]
    assert errors[0].line == position(text, "path:")[0] and errors[0].hint


@pytest.mark.parametrize("path", ["generated", "clusters/prod/generated", ".", "generated/"])
def test_good_path(tmp_path, path):
    assert _check(tmp_path, _spec(path=path)) == []


@pytest.mark.parametrize("rev", ["my branch", "a..b", "main~1", "", "refs/heads/", "-x:y"])
def test_bad_revision(tmp_path, rev):
    errors = _check(tmp_path, _spec(revision=rev))
    assert [d.code for d in errors] == ["GP116"]


@pytest.mark.parametrize("rev", ["main", "release/2026.08", "v1.2.3", "HEAD", "3f2a9c1d"])
def test_good_revision(tmp_path, rev):
    assert _check(tmp_path, _spec(revision=rev)) == []
