"""A tier without a profile on a mixed MIG pool gets the GPUs the pool's device
groups leave MIG-disabled, as nvidia.com/gpu (docs/rules.md, docs/capacity.md)."""

from tests.rules.helpers import BASE, edit, only, position

MIXED = "sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}"
PER_GPU = ("sharing: {mode: mig, strategy: mixed, devices: [{devices: [0, 1], layout: {1g.10gb: 7}}, "
           "{devices: [2, 3]}]}")
WHOLE = "{name: whole, pool: infer, workload: inference, priority: 4000}"


def test_tier_without_profile_gets_the_mig_disabled_gpus(run):
    text = edit(BASE, MIXED, PER_GPU)
    text = edit(text, "  tenants:\n", f"    - {WHOLE}\n  tenants:\n")
    text = edit(text, "alpha-ns: {training: 8, serve: 8, notebooks: 16}",
                "alpha-ns: {serve: 8, notebooks: 16, whole: 2}")
    diags = run(text)
    codes = [d.code for d in diags]
    assert "GP401" not in codes and "GP412" not in codes, [(d.code, d.message) for d in diags]
    from gpuplan.compiler import compile_fleet

    out = compile_fleet(run.tmp_path / f"fleet{run.n}.yaml")
    quota = out.files["tenants/alpha/resourcequotas.yaml"].decode()
    assert "requests.nvidia.com/gpu: '2'" in quota  # the tier's units, as whole GPUs


def test_tier_without_profile_still_refused_when_every_gpu_is_mig(run):
    text = edit(BASE, "  tenants:\n", f"    - {WHOLE}\n  tenants:\n")
    d = only(run(text), "GP401")
    assert (d.line, d.col) == position(text, "whole, pool: infer")
    assert "1g.10gb" in d.hint


def test_unknown_profile_is_not_offered_back(run):
    text = edit(BASE, "layout: {1g.10gb: 7}", "layout: {1g.11gb: 7}")
    diags = run(text)
    assert only(diags, "GP201").hint.startswith("did you mean '1g.10gb'")
    # the tier's 1g.10gb is right; the layout is what is wrong, and 1g.11gb is never a choice
    assert all("1g.11gb" not in (d.hint or "") for d in diags if d.code != "GP201")
    assert "GP402" not in [d.code for d in diags]
    text = edit(BASE, "layout: {1g.10gb: 7}", "layout: {1g.11gb: 3, 2g.20gb: 2}")
    # GP402 follows from a layout GP201 refuses (gpuplan.rules.cascade): only with GP201 disabled
    # is it shown, and then it still offers no profile the GPU does not have
    assert only(run(text), "GP201") and "GP402" not in run.codes(text)
    text = edit(text, "  pools:\n", "  rules:\n    disable:\n      - {code: GP201, reason: test}\n  pools:\n")
    d = only(run(text), "GP402")
    assert "1g.11gb" not in d.hint and "2g.20gb" in d.hint
