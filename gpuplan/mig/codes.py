"""Codes of MIG geometry (GP201-GP208) and the solver's failure kinds mapped to them.

A light module: the fleet rules (`gpuplan.rules.mig`) and the mig-parted file
checker (`gpuplan.mig.migparted`) share it without importing each other.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity
from gpuplan.mig.solver import FailureKind

E_UNKNOWN_PROFILE = Code(
    "GP201", "MIG profile does not exist on this GPU", Severity.ERROR,
    "Profile names are per GPU model: 1g.10gb means a single-memory slice on A100-80GB but a "
    "double-memory one on A100-40GB, and 4g.20gb does not exist on A100-80GB.",
    bad="gpu: A100-SXM4-80GB\nsharing: {mode: mig, layout: {4g.20gb: 1}}",
    good="gpu: A100-SXM4-80GB\nsharing: {mode: mig, layout: {4g.40gb: 1}}",
    pain="#1 NVIDIA/gpu-operator #262, #3 NVIDIA/gpu-operator #351",
)
E_COUNT = Code(
    "GP202", "MIG profile count above its limit", Severity.ERROR,
    "A profile is requested more often than one GPU allows (e.g. 3g at most twice).",
    bad="layout: {3g.40gb: 3}", good="layout: {3g.40gb: 2}",
)
E_MEDIA = Code(
    "GP203", "media-extension profiles exclude each other", Severity.ERROR,
    "A GPU has one set of media engines: at most one +me instance, and +me.all excludes "
    "every profile but -me ones.",
    bad="layout: {1g.10gb+me: 2}", good="layout: {1g.10gb+me: 1, 1g.10gb: 5}",
)
E_PLACEMENT = Code(
    "GP204", "MIG layout cannot be placed", Severity.ERROR,
    "Every count is allowed, but the instances cannot all get an allowed placement without "
    "sharing a memory slice (e.g. 3g+3g+1g needs 9 of 8 memory slices).",
    bad="layout: {3g.40gb: 2, 1g.10gb: 1}", good="layout: {4g.40gb: 1, 3g.40gb: 1}",
    pain="#1 NVIDIA/gpu-operator #262, #6 NVIDIA/mig-parted #189",
)
E_DRIVER = Code(
    "GP205", "MIG layout needs a newer driver", Severity.ERROR,
    "The layout uses a profile or combination that the configured driver branch cannot create "
    "(e.g. 4g+3g on A100 needs R510).",
    bad="driverVersion: \"470.82.01\"\nlayout: {4g.40gb: 1, 3g.40gb: 1}",
    good="driverVersion: \"550.90.07\"\nlayout: {4g.40gb: 1, 3g.40gb: 1}",
)
E_NOT_MIG = Code(
    "GP206", "MIG on a GPU without MIG", Severity.ERROR,
    "The pool's GPU model does not support MIG (T4, V100, A10, A10G, A40, L4, L40, L40S...). "
    "mig-parted would silently do nothing on such a node.",
    bad="gpu: L40S\nsharing: {mode: mig, layout: {1g.12gb: 4}}",
    good="gpu: L40S\nsharing: {mode: time-slicing, replicas: 4}",
    pain="#25 (mig-parted silently no-ops on unsupported GPU)",
)
E_MIG_PARTED_SCHEMA = Code(
    "GP207", "mig-parted config does not follow its schema", Severity.ERROR,
    "`gpuplan mig check --mig-parted`: the file breaks mig-parted's v1 config schema "
    "(unknown keys, mig-devices with mig-enabled: false, bad device-filter).",
    bad="mig-configs:\n  x:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {1g.10gb: 7}",
    good="mig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: 7}",
)
W_UNKNOWN_DEVICE = Code(
    "GP208", "device-filter matches no known GPU", Severity.WARNING,
    "`gpuplan mig check --mig-parted`: a device-filter id is not in gpuplan's catalog, so its "
    "layouts cannot be checked.",
    bad='- device-filter: "0x12345678"\n  devices: all\n  mig-enabled: true\n  mig-devices: {1g.10gb: 7}',
    good='- device-filter: "0x20B210DE"  # A100-SXM4-80GB\n  devices: all\n  mig-enabled: true\n  mig-devices: {1g.10gb: 7}',
)
W_UNFILTERED_NOT_EVERYWHERE = Code(
    "GP213", "config without device-filter cannot be created on some GPUs", Severity.WARNING,
    "`gpuplan mig check --mig-parted`: an entry without `device-filter` applies to every GPU of "
    "a node that selects the config. mig-manager only meets GPUs whose model has all the entry's "
    "profiles; on those where the layout does not fit (e.g. `all-1g.24gb` on an RTX PRO 5000, whose "
    "1g.24gb limit is 2), selecting it fails. The config is valid where it fits (NVIDIA ships such "
    "configs): add a device-filter to say where it is meant for.",
    bad="all-1g.24gb:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {1g.24gb: 4}",
    good='all-1g.24gb:\n  - device-filter: "0x2BB510DE"  # RTX PRO 6000 Blackwell Server\n'
         "    devices: all\n    mig-enabled: true\n    mig-devices: {1g.24gb: 4}",
)
W_PROFILE_NOT_IN_CATALOG = Code(
    "GP214", "profiles no catalog GPU has", Severity.WARNING,
    "`gpuplan mig check --mig-parted`: an entry without `device-filter` names profiles that no GPU "
    "in gpuplan's catalog has together. Either a GPU newer than the catalog (NVIDIA's own file has "
    "some) or a misspelt name; the entry is not checked.",
    bad="all-7g.189gb:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {7g.189gb: 1}",
    good="all-7g.180gb:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {7g.180gb: 1}   # B200",
)
CODES = (
    E_UNKNOWN_PROFILE, E_COUNT, E_MEDIA, E_PLACEMENT, E_DRIVER, E_NOT_MIG, E_MIG_PARTED_SCHEMA,
    W_UNKNOWN_DEVICE, W_UNFILTERED_NOT_EVERYWHERE, W_PROFILE_NOT_IN_CATALOG,
)

FAILURE_CODES: dict[FailureKind, Code] = {
    FailureKind.UNKNOWN_PROFILE: E_UNKNOWN_PROFILE,
    FailureKind.COUNT_LIMIT: E_COUNT,
    FailureKind.MEDIA_EXCLUSIVE: E_MEDIA,
    FailureKind.NO_PLACEMENT: E_PLACEMENT,
    FailureKind.DRIVER_TOO_OLD: E_DRIVER,
    FailureKind.NOT_MIG_CAPABLE: E_NOT_MIG,
}
