"""Exact MIG geometry: is a layout creatable on one GPU, and where does each
instance go.

A layout (profile -> count, one GPU) is creatable iff (reference/mig/rules.md §1):
(a) every profile exists on that model, (b) every count is within the
profile's limit (and the total within the GPU's), (c) the media-engine rules
hold (§3), and (d) every instance can get one of its allowed placements with
no two sharing a memory slice (NVML: creation fails on overlapping memory
slices). (d) is decided by an exact backtracking search over bitmasks of at
most 8 memory slices, never by imitating the order in which a driver would
create instances (§6: `-cgi 19,19,14,9` fails but the layout is valid).

Driver-version rules (§3) are applied only when a driver is given.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum
from functools import cached_property, lru_cache
from typing import Mapping

from gpuplan.catalog import GpuModel, MigProfile, get_gpu, parse_profile_name, resolve_gpu


class FailureKind(str, Enum):
    """Why a layout cannot be created; the rule module maps these to GP201-GP206."""

    UNKNOWN_PROFILE = "unknown-profile"
    COUNT_LIMIT = "count-limit"
    MEDIA_EXCLUSIVE = "media-exclusive"
    NO_PLACEMENT = "no-placement"
    DRIVER_TOO_OLD = "driver-too-old"
    NOT_MIG_CAPABLE = "not-mig-capable"


@dataclass(frozen=True)
class Placement:
    profile: str  # the name as requested (a `<c>c.` name sits on its GPU instance)
    start: int  # first memory slice
    size: int  # memory slices
    compute_slices: int

    @property
    def end(self) -> int:
        """Last memory slice (inclusive)."""
        return self.start + self.size - 1

    @property
    def slices(self) -> str:
        return str(self.start) if self.size == 1 else f"{self.start}-{self.end}"

    def __str__(self) -> str:
        return f"{self.profile}@{self.slices}"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str
    profile: str | None = None  # the profile the rule tripped on
    instance: int | None = None  # 1-based instance of `profile` that could not be placed
    count: int | None = None
    limit: int | None = None
    taken: tuple[Placement, ...] = ()  # NO_PLACEMENT: the fullest partial placement found
    free_slices: tuple[int, ...] = ()
    conflicts: tuple[str, ...] = ()  # MEDIA_EXCLUSIVE / DRIVER_TOO_OLD: profiles involved
    required_driver: int | None = None
    did_you_mean: tuple[str, ...] = ()  # UNKNOWN_PROFILE


@dataclass(frozen=True)
class Suggestion:
    layout: tuple[tuple[str, int], ...]
    removed: tuple[tuple[str, int], ...]
    added: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.layout)

    @property
    def text(self) -> str:
        return format_layout(self.layout)

    @property
    def change(self) -> str:
        parts = [f"-{format_layout(self.removed)}"] if self.removed else []
        parts += [f"+{format_layout(self.added)}"] if self.added else []
        return " ".join(parts)


@dataclass(frozen=True)
class LayoutCheck:
    gpu: str  # model key
    layout: tuple[tuple[str, int], ...]  # normalised request (zero counts dropped)
    ok: bool
    placements: tuple[Placement, ...] = ()  # sorted by start; deterministic
    failure: Failure | None = None
    driver: int | None = None

    def as_dict(self) -> dict[str, int]:
        return dict(self.layout)

    @cached_property
    def suggestions(self) -> tuple[Suggestion, ...]:
        """Nearest creatable layouts (fewest instances removed/changed), computed
        on first access so that a decision alone stays well under 1 ms."""
        if self.ok or self.failure is None or self.failure.kind is FailureKind.NOT_MIG_CAPABLE:
            return ()
        return nearest_layouts(get_gpu(self.gpu), self.layout, driver=self.driver)


# --- layout text -------------------------------------------------------------------


def format_layout(layout: Mapping[str, int] | tuple[tuple[str, int], ...]) -> str:
    """``3g.40gb=1,2g.20gb=2`` (the syntax `gpuplan mig check` reads)."""
    items = layout.items() if isinstance(layout, Mapping) else layout
    return ",".join(f"{p}={n}" for p, n in items)


def describe_layout(layout: Mapping[str, int] | tuple[tuple[str, int], ...]) -> str:
    """``3g.40gb + 2×2g.20gb`` for messages."""
    items = layout.items() if isinstance(layout, Mapping) else layout
    return " + ".join(p if n == 1 else f"{n}×{p}" for p, n in items) or "(empty)"


_DRIVER_RE = re.compile(r"^\s*[rR]?(\d{3})(?:\.\d+)*\s*$")


def parse_driver(driver: str | int | None) -> int | None:
    """Driver branch: ``R510``, ``510``, ``510.47.03`` -> 510."""
    if driver is None or isinstance(driver, int):
        return driver
    m = _DRIVER_RE.match(driver)
    if not m:
        raise ValueError(f"cannot read driver version {driver!r} (expected e.g. R535 or 535.104.05)")
    return int(m.group(1))


# --- profile lookup ----------------------------------------------------------------


def _display_key(p: MigProfile) -> tuple:
    return (-p.memory_slices, -p.compute_slices, p.media is not None, p.name)


@lru_cache(maxsize=None)
def display_order(gpu_key: str) -> tuple[str, ...]:
    """Profiles largest first; the key order of every layout this module returns."""
    return tuple(p.name for p in sorted(get_gpu(gpu_key).profiles, key=_display_key))


def geometry_profile(gpu: GpuModel, name: str) -> MigProfile | None:
    """The GPU-instance profile a requested name occupies: the profile itself,
    or for a compute-instance name ``<c>c.<g>g.<gb>gb`` its ``<g>g.<gb>gb``
    GPU instance (mig-parted creates one GPU instance per listed device)."""
    p = gpu.profile(name)
    if p is not None:
        return p
    parsed = parse_profile_name(name)
    if parsed is None or parsed.compute is None or parsed.compute > parsed.gpu_slices:
        return None
    return gpu.profile(parsed.gi_name)


def close_profiles(gpu: GpuModel, name: str, n: int = 3) -> tuple[str, ...]:
    """Profiles of ``gpu`` that ``name`` probably meant: same slice count and
    attributes with the nearest memory first (``1g.24gb`` on GB200 ->
    ``1g.23gb``), then names that merely look alike."""
    out: list[str] = []
    want = parse_profile_name(name)
    if want is not None:
        same = [
            p for p in gpu.profiles
            if p.compute_slices == want.gpu_slices and (p.media or None) == (want.attributes or None)
        ]
        same.sort(key=lambda p: (abs(p.memory_gb - want.memory_gb), p.memory_gb))
        out.extend(p.name for p in same)
    for m in difflib.get_close_matches(name, gpu.profile_names, n=n, cutoff=0.5):
        if m not in out:
            out.append(m)
    return tuple(out[:n])


def _normalise(gpu: GpuModel, layout: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    merged: dict[str, int] = {}
    for name, count in layout.items():
        if not isinstance(name, str):
            raise TypeError(f"profile names are strings, got {name!r}")
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count of {name!r} must be an integer, got {count!r}")
        if count < 0:
            raise ValueError(f"count of {name!r} is negative ({count})")
        p = gpu.profile(name)
        key = p.name if p is not None else name.strip()
        merged[key] = merged.get(key, 0) + count
    order = {n: i for i, n in enumerate(display_order(gpu.key))} if gpu.mig_capable else {}
    items = [(n, c) for n, c in merged.items() if c > 0]
    items.sort(key=lambda nc: (order.get(nc[0], len(order)), nc[0]))
    return tuple(items)


# --- public entry point --------------------------------------------------------------


def check_layout(
    gpu: GpuModel | str, layout: Mapping[str, int], *, driver: str | int | None = None
) -> LayoutCheck:
    """Decide whether ``layout`` (profile -> count) can be created on one GPU of
    model ``gpu``. ``driver`` (``R510``, ``535.104.05``) adds the driver-branch
    rules. Memoised on (model, layout, driver)."""
    model = resolve_gpu(gpu)
    if model is None:
        raise KeyError(f"unknown GPU model {gpu!r}")
    return _check(model.key, _normalise(model, layout), parse_driver(driver))


@lru_cache(maxsize=65536)
def _check(gpu_key: str, layout: tuple[tuple[str, int], ...], driver: int | None) -> LayoutCheck:
    gpu = get_gpu(gpu_key)

    def fail(f: Failure) -> LayoutCheck:
        return LayoutCheck(gpu_key, layout, False, failure=f, driver=driver)

    if not gpu.mig_capable:  # even an empty layout asks for MIG mode
        return fail(
            Failure(
                FailureKind.NOT_MIG_CAPABLE,
                f"{gpu.key} does not support MIG ({gpu.architecture}, compute capability "
                f"{gpu.compute_capability}; not in NVIDIA's MIG-supported GPUs)",
            )
        )
    f = _rule_failure(gpu, layout)
    if f is not None:
        return fail(f)
    gi = _gi_counts(gpu, layout)
    placed = _place(gpu_key, gi)
    if placed is None:
        return fail(_placement_failure(gpu, layout, gi))
    if driver is not None:
        f = _driver_failure(gpu, layout, driver)
        if f is not None:
            return fail(f)
    # hand the requested names back out, in the same order as the search used
    names: dict[str, list[str]] = {}
    for name, count in layout:
        names.setdefault(geometry_profile(gpu, name).name, []).extend([name] * count)  # type: ignore[union-attr]
    placements = []
    for gi_name, start in placed:
        p = gpu.profile(gi_name)
        assert p is not None
        placements.append(Placement(names[gi_name].pop(0), start, p.memory_slices, p.compute_slices))
    placements.sort(key=lambda pl: (pl.start, pl.profile))
    return LayoutCheck(gpu_key, layout, True, tuple(placements), None, driver)


# --- rules (a)-(c) -----------------------------------------------------------------------


def _gi_counts(gpu: GpuModel, layout: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}
    for name, count in layout:
        p = geometry_profile(gpu, name)
        assert p is not None
        out[p.name] = out.get(p.name, 0) + count
    return tuple(sorted(out.items()))


def _rule_failure(gpu: GpuModel, layout: tuple[tuple[str, int], ...]) -> Failure | None:
    unknown = [n for n, _ in layout if geometry_profile(gpu, n) is None]
    if unknown:
        name = unknown[0]
        close = close_profiles(gpu, name)
        others = f" (also {', '.join(repr(u) for u in unknown[1:])})" if len(unknown) > 1 else ""
        return Failure(
            FailureKind.UNKNOWN_PROFILE,
            f"{gpu.key} has no MIG profile {name!r}{others}; its profiles are "
            f"{', '.join(display_order(gpu.key))}",
            profile=name,
            did_you_mean=close,
        )
    gi = _gi_counts(gpu, layout)
    for name in display_order(gpu.key):
        count = dict(gi).get(name, 0)
        p = gpu.profile(name)
        assert p is not None
        if count > p.max_instances:
            return Failure(
                FailureKind.COUNT_LIMIT,
                f"{count}×{name} exceeds the limit of {p.max_instances} per GPU on {gpu.key}",
                profile=name,
                count=count,
                limit=p.max_instances,
            )
    total = sum(c for _, c in gi)
    if total > gpu.max_instances:
        return Failure(
            FailureKind.COUNT_LIMIT,
            f"{total} GPU instances exceed the limit of {gpu.max_instances} per GPU on {gpu.key}",
            count=total,
            limit=gpu.max_instances,
        )
    return _media_failure(gpu, gi)


def _media_failure(gpu: GpuModel, gi: tuple[tuple[str, int], ...]) -> Failure | None:
    media = {n: gpu.profile(n).media for n, _ in gi}  # type: ignore[union-attr]
    me = [(n, c) for n, c in gi if media[n] == "+me"]
    if sum(c for _, c in me) > 1:
        # The GPU has one OFA/JPEG: every +me profile takes it (rules.md §3;
        # on A30, 1g.6gb+me with 2g.12gb+me is inferred from engine counts).
        names = tuple(n for n, _ in me)
        return Failure(
            FailureKind.MEDIA_EXCLUSIVE,
            f"{' and '.join(names)} cannot be used together on {gpu.key}: each +me instance takes "
            "the GPU's only media engines (at most one +me instance per GPU)",
            profile=names[-1],
            conflicts=names,
        )
    all_me = [(n, c) for n, c in gi if media[n] == "+me.all"]
    if all_me:
        # NVML: an *_ALL_ME instance "prevents allocation of all but _NO_ME profiles".
        holder = all_me[0][0]
        others = tuple(n for n, _ in all_me[1:]) + tuple(
            n for n, _ in gi if media[n] not in ("-me", "+me.all")
        )
        if others:
            return Failure(
                FailureKind.MEDIA_EXCLUSIVE,
                f"{holder} takes all media engines of {gpu.key}; only -me profiles may share the GPU "
                f"with it, not {', '.join(others)}",
                profile=holder,
                conflicts=(holder, *others),
            )
    return None


def _driver_failure(gpu: GpuModel, layout: tuple[tuple[str, int], ...], driver: int) -> Failure | None:
    present = {geometry_profile(gpu, n).name for n, _ in layout}  # type: ignore[union-attr]
    for name in display_order(gpu.key):
        p = gpu.profile(name)
        if name in present and p is not None and p.min_driver and driver < p.min_driver:
            return Failure(
                FailureKind.DRIVER_TOO_OLD,
                f"{name} on {gpu.key} needs driver R{p.min_driver} or newer (have R{driver})",
                profile=name,
                conflicts=(name,),
                required_driver=p.min_driver,
            )
    for profiles, branch, source in gpu.combo_min_driver:
        if set(profiles) <= present and driver < branch:
            return Failure(
                FailureKind.DRIVER_TOO_OLD,
                f"{' with '.join(profiles)} on one {gpu.key} needs driver R{branch} or newer "
                f"(have R{driver}; {source})",
                profile=profiles[0],
                conflicts=tuple(profiles),
                required_driver=branch,
            )
    return None


# --- rule (d): exact placement search ---------------------------------------------------


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


@lru_cache(maxsize=None)
def _instances(gpu_key: str, gi: tuple[tuple[str, int], ...]) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    """Instances in search order: biggest first, then fewest placements."""
    gpu = get_gpu(gpu_key)
    out = []
    for name, count in gi:
        p = gpu.profile(name)
        assert p is not None
        opts = tuple((s, _mask(s, z)) for s, z in p.placements)
        out.extend([(name, opts)] * count)
    out.sort(key=lambda inst: (-gpu.profile(inst[0]).memory_slices, len(inst[1]), inst[0]))  # type: ignore[union-attr]
    return tuple(out)


@lru_cache(maxsize=65536)
def _place(gpu_key: str, gi: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...] | None:
    """First non-overlapping assignment in search order, as (profile, start)."""
    inst = _instances(gpu_key, gi)
    n = len(inst)
    chosen: list[tuple[str, int]] = []

    def go(i: int, used: int, min_start: int) -> bool:
        if i == n:
            return True
        name, opts = inst[i]
        for start, mask in opts:
            if start < min_start or used & mask:
                continue
            chosen.append((name, start))
            # identical instances are interchangeable: keep their starts increasing
            nxt = start + 1 if i + 1 < n and inst[i + 1][0] == name else 0
            if go(i + 1, used | mask, nxt):
                return True
            chosen.pop()
        return False

    return tuple(chosen) if go(0, 0, 0) else None


def _placement_failure(gpu: GpuModel, layout: tuple[tuple[str, int], ...], gi: tuple[tuple[str, int], ...]) -> Failure:
    """Explain a failed search: totals first, then the fullest partial placement."""
    inst = _instances(gpu.key, gi)
    need_mem = sum(gpu.profile(n).memory_slices * c for n, c in gi)  # type: ignore[union-attr]
    need_cmp = sum(gpu.profile(n).compute_slices * c for n, c in gi)  # type: ignore[union-attr]
    best: tuple[int, tuple[tuple[str, int], ...]] = (-1, ())

    def go(i: int, used: int, min_start: int, chosen: tuple[tuple[str, int], ...]) -> None:
        nonlocal best
        if i > best[0]:
            best = (i, chosen)
        if i == len(inst):
            return
        name, opts = inst[i]
        for start, mask in opts:
            if start >= min_start and not used & mask:
                nxt = start + 1 if i + 1 < len(inst) and inst[i + 1][0] == name else 0
                go(i + 1, used | mask, nxt, chosen + ((name, start),))

    go(0, 0, 0, ())
    depth, chosen = best
    taken = tuple(
        sorted(
            (Placement(n, s, gpu.profile(n).memory_slices, gpu.profile(n).compute_slices) for n, s in chosen),  # type: ignore[union-attr]
            key=lambda p: p.start,
        )
    )
    used = 0
    for p in taken:
        used |= _mask(p.start, p.size)
    free = tuple(i for i in range(gpu.memory_slices) if not used >> i & 1)
    stuck = inst[depth][0]
    p = gpu.profile(stuck)
    assert p is not None
    nth = sum(1 for n, _ in chosen if n == stuck) + 1
    what = describe_layout(layout)
    held = ", ".join(str(t) for t in taken) or "nothing"
    free_txt = ",".join(str(i) for i in free) or "none"
    detail = (
        f"{stuck} #{nth} may only start at {p.lgipp} and every such placement overlaps "
        f"memory slices already taken ({held}; free: {free_txt})"
    )
    if need_mem > gpu.memory_slices:
        msg = f"{what} needs {need_mem} memory slices; {gpu.key} has {gpu.memory_slices}"
    elif need_cmp > gpu.compute_slices:
        msg = f"{what} needs {need_cmp} compute slices; {gpu.key} has {gpu.compute_slices}: {detail}"
    else:
        msg = f"{what} cannot be placed on {gpu.key}: {detail}"
    return Failure(
        FailureKind.NO_PLACEMENT,
        msg,
        profile=stuck,
        instance=nth,
        count=need_mem,
        limit=gpu.memory_slices,
        taken=taken,
        free_slices=free,
    )


# --- enumeration -----------------------------------------------------------------------


def _layout_key(gpu: GpuModel, layout: tuple[tuple[str, int], ...]) -> tuple:
    order = display_order(gpu.key)
    d = dict(layout)
    cmp = sum(gpu.profile(n).compute_slices * c for n, c in layout)  # type: ignore[union-attr]
    mem = sum(gpu.profile(n).memory_slices * c for n, c in layout)  # type: ignore[union-attr]
    return (-cmp, -mem, tuple(-d.get(n, 0) for n in order))


def _enumerate(gpu_key: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    gpu = get_gpu(gpu_key)
    return _enumerate_table(gpu.table) if gpu.table else ()


@lru_cache(maxsize=None)
def _table_model(table: str) -> GpuModel:
    from gpuplan.catalog import mig_gpus

    return next(g for g in mig_gpus() if g.table == table)


@lru_cache(maxsize=None)
def _enumerate_table(table: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    """All creatable layouts of a profile table (boards sharing a table share
    them). A dynamic programme over profiles carrying the set of reachable
    used-slice masks: a count vector is creatable iff that set is non-empty and
    the count and media rules hold. Every rule is monotone (adding an instance
    never repairs a layout), so a count that fails ends its branch. The property
    tests check this against `check_layout` and a brute-force oracle."""
    gpu = _table_model(table)
    order = display_order(gpu.key)
    profs = [gpu.profile(n) for n in order]
    pmasks = [tuple(_mask(s, z) for s, z in p.placements) for p in profs]  # type: ignore[union-attr]
    found: list[tuple[tuple[str, int], ...]] = []

    def go(i: int, masks: frozenset[int], items: tuple[tuple[str, int], ...], total: int, me: int, all_me: int,
           other: int) -> None:
        if i == len(profs):
            if items:
                found.append(items)
            return
        go(i + 1, masks, items, total, me, all_me, other)
        p = profs[i]
        assert p is not None
        cur = masks
        for count in range(1, p.max_instances + 1):
            cur = frozenset(m | pm for m in cur for pm in pmasks[i] if not m & pm)
            t = total + count
            e = me + count * (p.media == "+me")
            a = all_me + count * (p.media == "+me.all")
            o = other + count * (p.media not in ("-me", "+me.all"))
            if not cur or t > gpu.max_instances or e > 1 or (a and (a > 1 or o)):
                break
            go(i + 1, cur, items + ((order[i], count),), t, e, a, o)

    go(0, frozenset([0]), (), 0, 0, 0, 0)
    found.sort(key=lambda lay: _layout_key(gpu, lay))
    return tuple(found)


def _maximal(gpu_key: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    gpu = get_gpu(gpu_key)
    return _maximal_table(gpu.table) if gpu.table else ()


@lru_cache(maxsize=None)
def _maximal_table(table: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    gpu = _table_model(table)
    every = _enumerate_table(table)
    have = set(every)
    order = display_order(gpu.key)
    out = []
    for lay in every:
        d = dict(lay)
        grows = False
        for name in order:
            bigger = dict(d)
            bigger[name] = bigger.get(name, 0) + 1
            if tuple((n, bigger[n]) for n in order if n in bigger) in have:
                grows = True
                break
        if not grows:
            out.append(lay)
    return tuple(out)


def enumerate_layouts(gpu: GpuModel | str, *, maximal: bool = False) -> tuple[dict[str, int], ...]:
    """Every distinct non-empty creatable layout of one GPU (current drivers),
    most compute first; ``maximal`` keeps those to which no further instance of
    any profile can be added. Cached per model."""
    model = resolve_gpu(gpu)
    if model is None:
        raise KeyError(f"unknown GPU model {gpu!r}")
    src = _maximal(model.key) if maximal else _enumerate(model.key)
    return tuple(dict(lay) for lay in src)


def layout_tuples(gpu: GpuModel | str, *, maximal: bool = False) -> tuple[tuple[tuple[str, int], ...], ...]:
    """As `enumerate_layouts`, as hashable tuples of (profile, count)."""
    model = resolve_gpu(gpu)
    if model is None:
        raise KeyError(f"unknown GPU model {gpu!r}")
    return _maximal(model.key) if maximal else _enumerate(model.key)


# --- suggestions -----------------------------------------------------------------------


def nearest_layouts(
    gpu: GpuModel, layout: tuple[tuple[str, int], ...], *, driver: int | None = None, limit: int = 3
) -> tuple[Suggestion, ...]:
    """Creatable layouts closest to ``layout``: fewest instances changed (a
    swap of one profile for another counts once), then most compute kept."""
    want: dict[str, int] = {}
    orig = dict(layout)
    for name, count in layout:
        p = geometry_profile(gpu, name)
        if p is None:  # an unknown name: assume the closest real one was meant
            close = close_profiles(gpu, name, 1)
            if not close:
                continue
            p = gpu.profile(close[0])
        assert p is not None
        want[p.name] = want.get(p.name, 0) + count
    scored = []
    for cand in _enumerate(gpu.key):
        if driver is not None and _driver_failure(gpu, cand, driver) is not None:
            continue
        have = dict(cand)
        r = sum(max(c - have.get(n, 0), 0) for n, c in want.items())
        a = sum(max(c - want.get(n, 0), 0) for n, c in have.items())
        # the change shown is against the request as written (unknown names included)
        removed = tuple((n, c - have.get(n, 0)) for n, c in orig.items() if c > have.get(n, 0))
        added = tuple((n, c - orig.get(n, 0)) for n, c in cand if c > orig.get(n, 0))
        scored.append(((max(r, a), r + a, *_layout_key(gpu, cand)), Suggestion(cand, removed, added)))
    scored.sort(key=lambda x: x[0])
    return tuple(s for _, s in scored[:limit])
