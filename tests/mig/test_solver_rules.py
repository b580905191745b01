"""Every rule of reference/mig/rules.md with creatable and non-creatable layouts."""

from __future__ import annotations


import pytest

from gpuplan.catalog import get_gpu
from gpuplan.mig.solver import (
    FailureKind,
    check_layout,
    describe_layout,
    format_layout,
    parse_driver,
)

A40 = "A100-SXM4-40GB"
A80 = "A100-SXM4-80GB"
H80 = "H100-SXM5-80GB"


def ok(gpu, layout, **kw):
    r = check_layout(gpu, layout, **kw)
    assert r.ok, r.failure
    return r


def bad(gpu, layout, kind, **kw):
    r = check_layout(gpu, layout, **kw)
    assert not r.ok, f"{layout} should not be creatable on {gpu}"
    assert r.failure is not None and r.failure.kind is kind, r.failure
    assert r.placements == ()
    return r


# --- rules.md §2 traps ----------------------------------------------------------------------


@pytest.mark.parametrize("gpu,four,three", [(A40, "4g.20gb", "3g.20gb"), (A80, "4g.40gb", "3g.40gb"),
                                            (H80, "4g.40gb", "3g.40gb"), ("B200", "4g.90gb", "3g.90gb")])
def test_4g_plus_3g_is_creatable(gpu, four, three):
    r = ok(gpu, {four: 1, three: 1})
    assert [(p.profile, p.start, p.size) for p in r.placements] == [(four, 0, 4), (three, 4, 4)]


@pytest.mark.parametrize("gpu,three,one", [(A40, "3g.20gb", "1g.5gb"), (A80, "3g.40gb", "1g.10gb"),
                                           ("H200", "3g.71gb", "1g.18gb")])
def test_3g_3g_1g_is_not_creatable(gpu, three, one):
    r = bad(gpu, {three: 2, one: 1}, FailureKind.NO_PLACEMENT)
    assert "needs 9 memory slices" in r.failure.message
    ok(gpu, {three: 2})


@pytest.mark.parametrize("gpu,dbl,one", [(A40, "1g.10gb", "1g.5gb"), (A80, "1g.20gb", "1g.10gb"),
                                         ("H100-NVL-94GB", "1g.24gb", "1g.12gb"), ("H200", "1g.35gb", "1g.18gb"),
                                         ("B200", "1g.45gb", "1g.23gb")])
def test_four_double_memory_1g_plus_any_1g_is_not_creatable(gpu, dbl, one):
    ok(gpu, {dbl: 4})
    bad(gpu, {dbl: 4, one: 1}, FailureKind.NO_PLACEMENT)
    bad(gpu, {dbl: 4, one + "+me": 1}, FailureKind.NO_PLACEMENT)
    # k8s-test-infra#886: 4×1g.10gb + 3×1g.5gb on A100-40GB, 7 compute slices, counts allowed, 11 memory slices
    if gpu == A40:
        assert "11 memory slices" in bad(gpu, {dbl: 4, one: 3}, FailureKind.NO_PLACEMENT).failure.message


def test_3g_2g_1g_1g_on_a100_40gb_is_creatable_whatever_the_creation_order():
    # nvidia-smi mig -cgi 19,19,14,9 fails, -cgi 9,19,14,19 works (UG_GEOMETRY): a driver
    # ordering problem, not a property of the layout.
    r = ok(A40, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1})
    assert [str(p) for p in r.placements] == ["2g.10gb@0-1", "1g.5gb@2", "1g.5gb@3", "3g.20gb@4-7"]
    # the order of the request does not matter
    assert check_layout(A40, {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}) is r


def test_4g_plus_two_2g_fails_on_alignment():
    r = bad(A40, {"4g.20gb": 1, "2g.10gb": 2}, FailureKind.NO_PLACEMENT)
    f = r.failure
    assert f.profile == "2g.10gb" and f.instance == 2
    assert [str(t) for t in f.taken] == ["4g.20gb@0-3", "2g.10gb@4-5"]
    assert f.free_slices == (6, 7)
    assert "{0,2,4}:2" in f.message
    ok(A40, {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1})


def test_seven_1g_and_three_2g_plus_1g_leave_slice_7_empty():
    r = ok(A40, {"1g.5gb": 7})
    assert [p.start for p in r.placements] == list(range(7))
    r = ok(A40, {"2g.10gb": 3, "1g.5gb": 1})
    assert max(p.end for p in r.placements) == 6
    bad(A40, {"2g.10gb": 3, "1g.5gb": 2}, FailureKind.NO_PLACEMENT)


def test_only_7g_3g_at_4_or_double_1g_at_6_can_use_slice_7():
    for layout in ({"7g.40gb": 1}, {"3g.20gb": 1}, {"1g.10gb": 4}):
        r = ok(A40, layout)
        assert any(p.end == 7 for p in r.placements) or layout == {"3g.20gb": 1}
    r = ok(A40, {"4g.20gb": 1, "3g.20gb": 1})
    assert r.placements[-1].end == 7
    r = ok(A40, {"2g.10gb": 3, "1g.10gb": 1})  # double-memory 1g must take 6-7
    assert ("1g.10gb", 6) in [(p.profile, p.start) for p in r.placements]


def test_2g_cannot_start_at_6():
    bad(A40, {"2g.10gb": 1, "1g.5gb": 6}, FailureKind.NO_PLACEMENT)  # 2g would need slice 6-7
    ok(A40, {"2g.10gb": 1, "1g.5gb": 5})


def test_a30_geometry():
    ok("A30", {"1g.6gb": 4})
    ok("A30", {"2g.12gb": 2})
    ok("A30", {"2g.12gb": 1, "1g.6gb": 2})
    ok("A30", {"4g.24gb": 1})
    bad("A30", {"4g.24gb": 1, "1g.6gb": 1}, FailureKind.NO_PLACEMENT)
    bad("A30", {"1g.6gb": 5}, FailureKind.COUNT_LIMIT)
    bad("A30", {"2g.12gb": 1, "1g.6gb": 3}, FailureKind.NO_PLACEMENT)


def test_rtx_pro_5000_two_slices():
    ok("RTX-PRO-5000-BLACKWELL", {"1g.24gb": 2})
    ok("RTX-PRO-5000-BLACKWELL", {"2g.48gb": 1})
    bad("RTX-PRO-5000-BLACKWELL", {"2g.48gb": 1, "1g.24gb": 1}, FailureKind.NO_PLACEMENT)


# --- (a) unknown profiles, (b) counts ---------------------------------------------------------


def test_unknown_profile_names_per_model():
    r = bad(A40, {"1g.10gb+me": 1}, FailureKind.UNKNOWN_PROFILE)  # exists on 80GB only
    assert r.failure.profile == "1g.10gb+me"
    r = bad("GB200", {"1g.24gb": 7}, FailureKind.UNKNOWN_PROFILE)  # early GB200 boards' name
    assert r.failure.did_you_mean[0] == "1g.23gb"
    assert r.suggestions[0].as_dict() == {"1g.23gb": 7}
    bad(A40, {"3g.40gb": 1}, FailureKind.UNKNOWN_PROFILE)
    ok(A80, {"3g.40gb": 1})


@pytest.mark.parametrize("profile,limit", [("1g.5gb", 7), ("1g.5gb+me", 1), ("1g.10gb", 4), ("2g.10gb", 3),
                                           ("3g.20gb", 2), ("4g.20gb", 1), ("7g.40gb", 1)])
def test_count_limits(profile, limit):
    r = bad(A40, {profile: limit + 1}, FailureKind.COUNT_LIMIT)
    assert (r.failure.profile, r.failure.count, r.failure.limit) == (profile, limit + 1, limit)


def test_zero_counts_are_ignored_and_bad_counts_rejected():
    r = ok(A40, {"3g.20gb": 1, "7g.40gb": 0})
    assert r.layout == (("3g.20gb", 1),)
    with pytest.raises(ValueError):
        check_layout(A40, {"1g.5gb": -1})
    with pytest.raises(TypeError):
        check_layout(A40, {"1g.5gb": 1.5})
    with pytest.raises(KeyError):
        check_layout("no-such-gpu", {"1g.5gb": 1})


def test_empty_layout_is_mig_mode_without_devices():
    assert check_layout(A40, {}).ok
    assert check_layout("T4", {}).failure.kind is FailureKind.NOT_MIG_CAPABLE


@pytest.mark.parametrize("gpu", ["T4", "V100-SXM2-16GB", "A10", "A10G", "A40", "L4", "L40", "L40S"])
def test_mig_on_a_gpu_without_mig(gpu):
    r = bad(gpu, {"1g.5gb": 1}, FailureKind.NOT_MIG_CAPABLE)
    assert gpu in r.failure.message and r.suggestions == ()


# --- (c) media rules ---------------------------------------------------------------------------


def test_plus_me_at_most_one():
    ok(A80, {"1g.10gb+me": 1, "1g.10gb": 6})
    bad(A80, {"1g.10gb+me": 2}, FailureKind.COUNT_LIMIT)
    ok("A30", {"1g.6gb+me": 1, "2g.12gb": 1, "1g.6gb": 1})
    ok("A30", {"2g.12gb+me": 1, "2g.12gb": 1})
    r = bad("A30", {"1g.6gb+me": 1, "2g.12gb+me": 1}, FailureKind.MEDIA_EXCLUSIVE)
    assert set(r.failure.conflicts) == {"1g.6gb+me", "2g.12gb+me"}


RTX = "RTX-PRO-6000-BLACKWELL-SERVER"


def test_me_all_excludes_everything_but_no_me():
    ok(RTX, {"1g.24gb+me.all": 1, "1g.24gb-me": 3})
    ok(RTX, {"2g.48gb+me.all": 1, "2g.48gb-me": 1})
    ok(RTX, {"1g.24gb+me.all": 1, "2g.48gb-me": 1, "1g.24gb-me": 1})
    for other in ("1g.24gb", "1g.24gb+gfx", "1g.24gb+me", "2g.48gb", "2g.48gb+gfx", "2g.48gb+me.all"):
        r = bad(RTX, {"1g.24gb+me.all": 1, other: 1}, FailureKind.MEDIA_EXCLUSIVE)
        assert other in r.failure.conflicts
    ok(RTX, {"1g.24gb+gfx": 2, "1g.24gb": 2})  # +gfx with plain: not documented as exclusive
    ok(RTX, {"1g.24gb+me": 1, "1g.24gb-me": 1, "2g.48gb": 1})


# --- driver rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text,branch", [("R510", 510), ("r470", 470), ("535", 535), ("535.104.05", 535), (525, 525)])
def test_parse_driver(text, branch):
    assert parse_driver(text) == branch


@pytest.mark.parametrize("text", ["latest", "R5", "5.10", ""])
def test_parse_driver_rejects(text):
    with pytest.raises(ValueError):
        parse_driver(text)


def test_driver_rules():
    r = bad(A40, {"4g.20gb": 1, "3g.20gb": 1}, FailureKind.DRIVER_TOO_OLD, driver="R470")
    assert r.failure.required_driver == 510
    ok(A40, {"4g.20gb": 1, "3g.20gb": 1}, driver="R510")
    bad(A80, {"4g.40gb": 1, "3g.40gb": 1}, FailureKind.DRIVER_TOO_OLD, driver="470.57.02")
    ok(A40, {"4g.20gb": 1, "2g.10gb": 1}, driver="R470")
    bad(A40, {"1g.10gb": 1}, FailureKind.DRIVER_TOO_OLD, driver="R515")
    ok(A40, {"1g.10gb": 1}, driver="R525")
    bad(A40, {"1g.5gb+me": 1}, FailureKind.DRIVER_TOO_OLD, driver="R460")
    ok(A40, {"1g.5gb+me": 1}, driver="R470")
    bad("A30", {"2g.12gb+me": 1}, FailureKind.DRIVER_TOO_OLD, driver="R515")
    # suggestions honour the driver
    r = check_layout(A40, {"4g.20gb": 1, "3g.20gb": 1}, driver="R470")
    assert all(check_layout(A40, s.as_dict(), driver="R470").ok for s in r.suggestions)
    # geometry comes before the driver: an impossible layout is NO_PLACEMENT on any driver
    bad(A40, {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}, FailureKind.NO_PLACEMENT, driver="R470")


# --- compute-instance names -------------------------------------------------------------------------


def test_compute_instance_profiles_occupy_their_gpu_instance():
    r = ok(A80, {"1c.3g.40gb": 1, "3g.40gb": 1})
    assert sorted(p.profile for p in r.placements) == ["1c.3g.40gb", "3g.40gb"]
    bad(A80, {"1c.3g.40gb": 2, "3g.40gb": 1}, FailureKind.COUNT_LIMIT)
    bad(A80, {"4c.3g.40gb": 1}, FailureKind.UNKNOWN_PROFILE)


# --- results, suggestions, determinism, speed -----------------------------------------------------------


def test_layout_text_helpers():
    assert format_layout({"3g.40gb": 1, "2g.20gb": 2}) == "3g.40gb=1,2g.20gb=2"
    assert describe_layout({"3g.40gb": 1, "2g.20gb": 2}) == "3g.40gb + 2×2g.20gb"


def test_suggestions_are_nearest_and_creatable():
    r = check_layout(A40, {"3g.20gb": 2, "1g.5gb": 1})
    assert [s.as_dict() for s in r.suggestions][:2] == [{"3g.20gb": 2}, {"3g.20gb": 1, "1g.5gb": 1}]
    assert r.suggestions[0].removed == (("1g.5gb", 1),) and r.suggestions[0].added == ()
    r = check_layout(A40, {"4g.20gb": 1, "2g.10gb": 2})
    assert r.suggestions[0].as_dict() == {"4g.20gb": 1, "2g.10gb": 1}
    for s in r.suggestions:
        assert check_layout(A40, s.as_dict()).ok
    assert check_layout(A40, {"1g.5gb": 1}).suggestions == ()


def test_results_are_deterministic_and_memoised():
    a = check_layout(A40, {"1g.5gb": 2, "3g.20gb": 1})
    b = check_layout(get_gpu(A40), {"3g.20gb": 1, "1g.5gb": 2})
    assert a is b
    assert check_layout("NVIDIA-A100-SXM4-40GB", {"1g.5gb": 2, "3g.20gb": 1}) is a


def test_a_decision_is_the_same_cached_or_not():
    """The memo only saves time: a decision made with cleared caches equals the cached one
    (how fast either is lives in benchmarks/bench_mig.py)."""
    from gpuplan.mig import solver

    layouts = [{"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}, {"4g.20gb": 1, "2g.10gb": 2}, {"1g.5gb": 7},
               {"3g.20gb": 2, "1g.5gb": 1}, {"1g.10gb": 4, "1g.5gb": 1}]
    cached = [check_layout(A40, layout) for layout in layouts]
    for layout, before in zip(layouts, cached):
        solver._check.cache_clear()
        solver._place.cache_clear()
        fresh = check_layout(A40, layout)
        assert fresh is not before
        assert (fresh.ok, fresh.placements, [s.as_dict() for s in fresh.suggestions]) == \
            (before.ok, before.placements, [s.as_dict() for s in before.suggestions])
    assert [check_layout(A40, layout).ok for layout in layouts] == [True, False, True, False, False]