"""The node-facts tables (gpuplan/upstream/nodes/): every fact names the upstream file it was
read from, the refresh re-reads it there, and a table's claim about what a platform lets
gpuplan configure on its nodes matches the platform's pinned schema."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gpuplan import nodefacts
from gpuplan.upstream import refresh_nodes

UPSTREAM = Path(nodefacts.__file__).resolve().parent / "upstream"


@pytest.mark.parametrize("platform", nodefacts.platforms())
def test_every_fact_names_its_source(platform):
    t = nodefacts.table(platform)
    assert t.platform == platform and t.facts
    for name, f in t.facts.items():
        src = t.sources[f["source"]]
        assert "value" in f, name
        if "url" in src:
            assert src["url"].startswith("https://"), name
            assert f.get("note"), f"{name}: a fact read from documentation says what it read"
            continue
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", src["repository"]) and src["ref"], name
        assert f["path"] and isinstance(f["line"], int) and f["line"] > 0, name
        if "absent" in f:
            continue
        rx = re.compile(f["pattern"])
        assert rx.groups >= 1, f"{name}: the pattern's first group is the value"


@pytest.mark.parametrize("platform", [p for p in nodefacts.platforms() if nodefacts.table(p).node_config.get("schema")])
def test_node_config_matches_the_pinned_schema(platform):
    """``nodeConfig.fields`` lists the spec fields that carry node configuration; an empty list is a
    claim that the platform's object has none, which gpuplan's toolkit choice rests on (GP991)."""
    nc = nodefacts.table(platform).node_config
    schema = json.loads((UPSTREAM / nc["schema"]).read_text())
    spec = schema["properties"]["spec"]["properties"]
    for field in nc["fields"]:
        assert field in spec, field
    if not nc["fields"]:
        carriers = [k for k in spec if re.search(r"user.?data|custom.?data|bootstrap|script|cloudinit", k, re.I)]
        assert carriers == [], f"{platform}: {carriers} may configure nodes"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    """A fake upstream repository and a table that reads it."""
    repo = tmp_path / "up"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "conf.toml").write_text("a = 1\nenable_cdi = true\ndefault_runtime_name = \"nvidia\"\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    tables = tmp_path / "nodes"
    tables.mkdir()
    table = {"platform": "fake", "describes": "fake", "sources": {"up": {"repository": "o/up", "ref": first}},
             "facts": {
                 "cdi": {"value": True, "source": "up", "path": "conf.toml", "line": 2, "pattern": "enable_cdi = (true|false)"},
                 "runtimeHandler": {"value": "nvidia", "source": "up", "path": "conf.toml", "line": 3,
                                    "pattern": "default_runtime_name = \"([a-z-]+)\""},
                 "noSnapshotter": {"value": False, "source": "up", "path": "conf.toml", "line": 1, "absent": "snapshotter"}}}
    (tables / "fake.json").write_text(json.dumps(table))
    monkeypatch.setattr(refresh_nodes, "TABLES", tables)
    return repo, tables


def test_refresh_follows_a_moved_fact_and_reads_its_new_value(upstream):
    repo, tables = upstream
    (repo / "conf.toml").write_text("# moved\n\na = 1\ndefault_runtime_name = \"nvidia-container-runtime\"\n"
                                    "enable_cdi = false\n")
    _git(repo, "commit", "-qam", "two")
    assert refresh_nodes.main(["fake", f"up={repo}", "--ref", "up=HEAD"]) == 0
    facts = json.loads((tables / "fake.json").read_text())["facts"]
    assert (facts["cdi"]["line"], facts["cdi"]["value"]) == (5, False)
    assert (facts["runtimeHandler"]["line"], facts["runtimeHandler"]["value"]) == (4, "nvidia-container-runtime")


def test_refresh_fails_when_a_fact_is_gone_or_an_absent_one_appears(upstream, capsys):
    repo, tables = upstream
    before = (tables / "fake.json").read_text()
    (repo / "conf.toml").write_text("a = 1\nsnapshotter = \"soci\"\n")
    _git(repo, "commit", "-qam", "two")
    assert refresh_nodes.main(["fake", f"up={repo}", "--ref", "up=HEAD"]) == 1
    err = capsys.readouterr().err
    assert "cdi: pattern" in err and "runtimeHandler: pattern" in err and "noSnapshotter:" in err
    assert (tables / "fake.json").read_text() == before, "a failed refresh writes nothing"
