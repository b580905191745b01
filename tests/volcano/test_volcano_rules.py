"""GP435-GP437: what a Volcano queue cannot hold apart, and Kueue settings that do nothing there."""

from __future__ import annotations

from pathlib import Path

from tests.rules.helpers import BASE, only, position

REPO = Path(__file__).parents[2]
VOLCANO_CODES = ("GP435", "GP436", "GP437")


def _with(text: str, queueing: str) -> str:
    assert "\n  queueing:" not in text
    return text.rstrip("\n") + f"\n  queueing: {queueing}\n"


def test_a_plain_volcano_fleet_raises_none(run):
    assert [c for c in run.codes(_with(BASE, "{engine: volcano}")) if c in VOLCANO_CODES] == []
    assert [c for c in run.codes(_with(BASE, "{}")) if c in VOLCANO_CODES] == []  # Kueue: not these rules


def test_gp435_a_pool_split_by_capacity_type(run):
    text = _with((REPO / "examples" / "aws-spot.yaml").read_text(), "{engine: volcano, tiers: [batch, serving-l40s]}")
    d = only(run(text), "GP435")
    assert d.is_error and "infer-l40s" in d.message
    assert (d.line, d.col) == position(text, "volcano", 0)
    # the same tiers queued by Kueue: a flavor per capacity type holds them apart
    kueue = _with((REPO / "examples" / "aws-spot.yaml").read_text(), "{tiers: [batch, serving-l40s]}")
    assert "GP435" not in run.codes(kueue)


def test_gp436_a_queued_tier_on_a_dra_pool(run):
    text = _with((REPO / "examples" / "dra.yaml").read_text(), "{engine: volcano, tiers: [training, inference-large]}")
    d = only(run(text), "GP436")
    assert d.is_error and "infer-a100" in d.message
    assert "GP436" not in run.codes(_with((REPO / "examples" / "dra.yaml").read_text(),
                                          "{engine: volcano, tiers: [training]}"))


def test_gp437_kueue_settings_under_volcano_at_their_keys(run):
    text = _with(BASE, "{engine: volcano, integrations: [batch/job], fairSharing: false}")
    found = [d for d in run(text) if d.code == "GP437"]
    assert sorted(d.message.split()[0] for d in found) == ["queueing.fairSharing", "queueing.integrations"]
    assert {(d.line, d.col) for d in found} == {position(text, "integrations"), position(text, "fairSharing")}
    assert all(not d.is_error for d in found)
    assert "GP437" not in run.codes(_with(BASE, "{engine: kueue, integrations: [batch/job], fairSharing: false}"))
