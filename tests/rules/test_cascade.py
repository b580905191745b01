"""An invalid value reports once: the rules computed from it (capacity, tier resources)
stay silent on it (gpuplan.rules.cascade)."""

import pytest

from tests.rules.helpers import BASE, edit, only, position

QUOTA = "alpha-ns: {training: 8, serve: 8, notebooks: 16}"
SERVE = "- {name: serve, pool: infer, profile: 1g.10gb,"


def _mig(layout: str, profile: str, serve: int) -> str:
    text = edit(BASE, "layout: {1g.10gb: 7}", f"layout: {layout}")
    text = edit(text, SERVE, f"- {{name: serve, pool: infer, profile: {profile},")
    return edit(text, QUOTA, f"alpha-ns: {{training: 8, serve: {serve}, notebooks: 16}}")


def test_impossible_layout_reports_only_its_geometry_error(run):
    # 3 × 3g.40gb do not fit an A100 (at most 2); the 13 granted would also exceed the 12 the
    # layout would advertise, but that number comes from the layout that cannot be created
    text = _mig("{3g.40gb: 3}", "3g.40gb", 13)
    diags = run(text)
    d = only(diags, "GP202")
    assert (d.line, d.col) == position(text, "3g.40gb: 3}")
    assert [x.code for x in diags if x.code.startswith("GP4")] == []


def test_unplaceable_layout_hides_capacity_and_profile_errors(run):
    # 2 × 3g + 1g needs 9 of 8 memory slices (GP204): no GP410 on serve, no GP412 on the 1g slices
    diags = run(_mig("{3g.40gb: 2, 1g.10gb: 1}", "3g.40gb", 9))
    assert only(diags, "GP204")
    assert {"GP410", "GP412"}.isdisjoint(d.code for d in diags)
    # a tier profile missing from an invalid layout (GP402) is not reported either
    diags = run(_mig("{1g.10gb: 8}", "3g.40gb", 8))
    assert only(diags, "GP202")
    assert {"GP402", "GP412"}.isdisjoint(d.code for d in diags)


def test_invalid_sharing_config_hides_capacity_errors(run):
    # replicas 1 is refused (GP301): the 6 granted against "4 GPUs × 1 replica" is not a finding
    text = edit(edit(BASE, "replicas: 4}", "replicas: 1}"), QUOTA, "alpha-ns: {training: 8, serve: 8, notebooks: 6}")
    diags = run(text)
    assert only(diags, "GP301")
    assert "GP410" not in [d.code for d in diags]


def test_other_pools_keep_their_findings(run):
    # pool infer's layout is invalid; pool train's quota of 9 over 8 GPUs is still GP410
    text = _mig("{3g.40gb: 3}", "3g.40gb", 13)
    text = edit(text, "training: 8, serve: 13", "training: 9, serve: 13")
    diags = run(text)
    assert only(diags, "GP202")
    d = only(diags, "GP410")
    assert "tier training" in d.message
    assert (d.line, d.col) == position(text, "9, serve")


def test_valid_layout_overcommitted_quota_still_anchored_at_the_quota(run):
    text = edit(BASE, QUOTA, "alpha-ns: {training: 8, serve: 29, notebooks: 16}")
    d = only(run(text), "GP410")
    assert "tier serve" in d.message
    assert (d.line, d.col) == position(text, "29,")


def test_a_disabled_root_error_hides_nothing(run):
    # with GP202 disabled nothing reports the layout, so what is computed from it is shown
    text = _mig("{3g.40gb: 3}", "3g.40gb", 13)
    text = edit(text, "  pools:\n", "  rules:\n    disable:\n      - {code: GP202, reason: test}\n  pools:\n")
    codes = [d.code for d in run(text)]
    assert "GP202" not in codes and "GP410" in codes


@pytest.mark.parametrize("path", [
    ("spec", "pools", 1, "sharing", "layout", "3g.40gb"),
    ("spec", "tenants", 0, "quotas", "alpha-ns", "serve"),
    ("spec", "tiers", 12, "gang", "topologyLevel"),
    ("spec", "cluster", "labels", "a b"),
])
def test_parse_path_inverts_format_path(path):
    from gpuplan.spec.validate import format_path, parse_path

    assert parse_path(format_path(path)) == path
