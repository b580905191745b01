"""Generate ``gpuplan/catalog/gpus.json`` from the reference MIG tables.

    python -m gpuplan.catalog.build_catalog [REFERENCE/mig/mig-profiles.yaml]

(``python -m gpuplan.upstream.refresh`` runs it with the other pinned upstream
material and records the input's sha256 in ``gpuplan/upstream/sources.json``.)

The reference YAML (``mig-profiles.yaml``) is the ground truth for MIG geometry:
profile names, ids, slices, instance limits, placements and their provenance. It
does not carry product names (nvidia-smi / GPU Feature Discovery), aliases,
memory, architecture or compute capability, and it groups several boards under
one profile table. ``MODELS`` below adds those facts by hand, one entry per
board, and names the reference table each board uses. The script cross-checks
the two: every reference table and every PCI id must be claimed by exactly one
board, so a new GPU in the reference fails the build instead of vanishing.

Only this script reads YAML; the runtime loads the JSON (stdlib only).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
OUT = Path(__file__).with_name("gpus.json")

# reference `gpus[].model` string -> our profile-table key
TABLES: dict[str, str] = {
    "A100-SXM4-40GB / A100-PCIE-40GB (also A800-40GB)": "A100-40GB",
    "A100-SXM4-80GB / A100-PCIE-80GB (also A800-80GB)": "A100-80GB",
    "H100-80GB (H100 SXM5 80GB, H100 PCIe 80GB; also H800 80GB)": "H100-80GB",
    "H100-NVL-94GB (H100 PCIe/SXM5 94GB; also H800 NVL)": "H100-94GB",
    "H100-96GB (H100 on GH200 96GB / H100 96GB / PG506-96GB) and H20 96GB": "H100-96GB",
    "H200-141GB (H200 SXM 141GB, H200 NVL)": "H200-141GB",
    "GH200 144G HBM3e (H200-class memory on GH200)": "GH200-144GB",
    "B200 (180GB; HGX B200)": "B200",
    "GB200 (HGX GB200, 186GB per GPU)": "GB200",
    "B300 (B300 SXM6 AC)": "B300",
    "GB300": "GB300",
    "A30-24GB": "A30",
    "RTX PRO 6000 Blackwell (Server Edition; Workstation and Max-Q editions share the MIG table)": "RTX-PRO-6000",
    "RTX PRO 5000 Blackwell (48GB)": "RTX-PRO-5000",
}

# Driver facts from rules.md §3 (UG_PROFILES notes, UG_PREREQ, UG_CONCEPTS).
# profile -> minimum driver branch, per table
PROFILE_MIN_DRIVER: dict[str, dict[str, int]] = {
    "A100-40GB": {"1g.5gb+me": 470, "1g.10gb": 525},
    "A30": {"1g.6gb+me": 470, "2g.12gb+me": 525},
}
# (profiles that together need a newer driver, branch, source); the reference
# states the 4g+3g rule for A100 only.
COMBO_MIN_DRIVER: dict[str, list[dict[str, Any]]] = {
    "A100-40GB": [{"profiles": ["4g.20gb", "3g.20gb"], "min_driver": 510, "source": "UG_CONCEPTS"}],
    "A100-80GB": [{"profiles": ["4g.40gb", "3g.40gb"], "min_driver": 510, "source": "UG_CONCEPTS"}],
}


def _m(key, table, smi, pci, *, arch, cc, aliases=(), karpenter=None, names_inferred=False, note=None):
    return {
        "key": key,
        "table": table,
        "smi_names": list(smi),
        "pci_ids": list(pci),
        "architecture": arch,
        "compute_capability": cc,
        "aliases": list(aliases),
        "karpenter_gpu_name": karpenter,
        "names_inferred": names_inferred,
        "note": note,
    }


# One entry per board. smi_names: `nvidia-smi --query-gpu=name` / NVML
# nvmlDeviceGetName (first = current drivers; older drivers dropped the
# "NVIDIA " prefix). GFD's `nvidia.com/gpu.product` is the same text with
# spaces turned into '-', so it is derived, not listed. Compute capability:
# CUDA programming guide table. Karpenter names: reference/k8s/facts.md
# (`karpenter.k8s.aws/instance-gpu-name`). Generic aliases ("H100", "H200")
# pick the SXM board, the one cloud instance types carry; an alias that would
# be ambiguous in memory size ("A100", "V100") is not given.
MODELS: list[dict[str, Any]] = [
    # --- Ampere GA100, 40GB table
    _m("A100-SXM4-40GB", "A100-40GB", ["NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"], ["0x20B0"],
       arch="Ampere", cc="8.0", aliases=["A100-40GB", "A100-SXM-40GB"], karpenter="a100"),
    _m("A100-PCIE-40GB", "A100-40GB", ["NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"], ["0x20B1", "0x20F1"],
       arch="Ampere", cc="8.0", aliases=["A100-40GB-PCIE"]),
    _m("A800-PCIE-40GB", "A100-40GB", ["NVIDIA A800 40GB PCIe"], ["0x20F6"],
       arch="Ampere", cc="8.0", aliases=["A800-40GB"], names_inferred=True),
    # --- Ampere GA100, 80GB table
    _m("A100-SXM4-80GB", "A100-80GB", ["NVIDIA A100-SXM4-80GB"], ["0x20B2"],
       arch="Ampere", cc="8.0", aliases=["A100-80GB", "A100-SXM-80GB"], karpenter="a100"),
    _m("A100-PCIE-80GB", "A100-80GB", ["NVIDIA A100 80GB PCIe"], ["0x20B5"],
       arch="Ampere", cc="8.0", aliases=["A100-80GB-PCIE"]),
    _m("A800-SXM4-80GB", "A100-80GB", ["NVIDIA A800-SXM4-80GB"], ["0x20F3"],
       arch="Ampere", cc="8.0", aliases=["A800-80GB"], names_inferred=True),
    _m("A800-PCIE-80GB", "A100-80GB", ["NVIDIA A800 80GB PCIe"], ["0x20F5"],
       arch="Ampere", cc="8.0", names_inferred=True),
    # --- Ampere GA100, A30
    _m("A30", "A30", ["NVIDIA A30"], ["0x20B7"], arch="Ampere", cc="8.0", aliases=["A30-24GB"]),
    # --- Hopper GH100, 80GB table
    _m("H100-SXM5-80GB", "H100-80GB", ["NVIDIA H100 80GB HBM3"], ["0x2330"],
       arch="Hopper", cc="9.0", aliases=["H100-80GB", "H100-SXM-80GB", "H100-SXM5", "H100"], karpenter="h100"),
    _m("H100-PCIE-80GB", "H100-80GB", ["NVIDIA H100 PCIe"], ["0x2331"],
       arch="Hopper", cc="9.0", aliases=["H100-PCIE"]),
    _m("H800-SXM5-80GB", "H100-80GB", ["NVIDIA H800"], ["0x2324"],
       arch="Hopper", cc="9.0", aliases=["H800", "H800-80GB"], names_inferred=True),
    _m("H800-PCIE-80GB", "H100-80GB", ["NVIDIA H800 PCIe"], ["0x2322"],
       arch="Hopper", cc="9.0", aliases=["H800-PCIE"], names_inferred=True),
    # --- Hopper GH100, 94GB table
    _m("H100-NVL-94GB", "H100-94GB", ["NVIDIA H100 NVL"], ["0x2321"],
       arch="Hopper", cc="9.0", aliases=["H100-NVL", "H100-94GB"]),
    _m("H100-SXM5-94GB", "H100-94GB", ["NVIDIA H100 SXM5 94GB"], ["0x2339"],
       arch="Hopper", cc="9.0", names_inferred=True,
       note="in pci.ids but in no mig-parted device-filter (rules.md §9.9)"),
    _m("H800-NVL-94GB", "H100-94GB", ["NVIDIA H800 NVL"], ["0x233A"],
       arch="Hopper", cc="9.0", aliases=["H800-NVL"], names_inferred=True),
    # --- Hopper GH100, 96GB table
    _m("GH200-96GB", "H100-96GB", ["NVIDIA GH200 480GB", "NVIDIA GH200 120GB"], ["0x2342"],
       arch="Hopper", cc="9.0", aliases=["GH200", "GH200-480GB", "GH200-120GB"]),
    _m("H100-96GB", "H100-96GB", ["NVIDIA H100 96GB HBM3"], ["0x233D"],
       arch="Hopper", cc="9.0", names_inferred=True),
    _m("PG506-96GB", "H100-96GB", ["NVIDIA PG506-232"], ["0x20B6"],
       arch="Ampere", cc="8.0", aliases=["PG506-232"], names_inferred=True,
       note="pci.ids calls it GA100GL yet mig-parted groups it with the Hopper 96GB parts (rules.md, H100-96GB inferred_fields)"),
    _m("H20", "H100-96GB", ["NVIDIA H20"], ["0x2329"], arch="Hopper", cc="9.0", aliases=["H20-96GB"],
       note="profile names inferred from mig-parted's all-balanced group (no NVIDIA table)"),
    # --- Hopper GH100, H200
    _m("H200-SXM-141GB", "H200-141GB", ["NVIDIA H200"], ["0x2335"],
       arch="Hopper", cc="9.0", aliases=["H200", "H200-141GB", "H200-SXM"], karpenter="h200"),
    _m("H200-NVL-141GB", "H200-141GB", ["NVIDIA H200 NVL"], ["0x233B"],
       arch="Hopper", cc="9.0", aliases=["H200-NVL"]),
    _m("GH200-144GB", "GH200-144GB", ["NVIDIA GH200 144G HBM3e"], ["0x2348"],
       arch="Hopper", cc="9.0", aliases=["GH200-144G", "GH200-144G-HBM3E"]),
    # --- Blackwell
    _m("B200", "B200", ["NVIDIA B200"], ["0x2901"], arch="Blackwell", cc="10.0",
       aliases=["B200-180GB", "HGX-B200"], karpenter="b200"),
    _m("GB200", "GB200", ["NVIDIA GB200"], ["0x2941"], arch="Blackwell", cc="10.0",
       aliases=["GB200-186GB", "HGX-GB200"]),
    _m("B300", "B300", ["NVIDIA B300 SXM6 AC"], ["0x3182"], arch="Blackwell Ultra", cc="10.3",
       aliases=["B300-SXM6-AC", "B300-SXM6"], karpenter="b300"),
    _m("GB300", "GB300", ["NVIDIA GB300"], ["0x31C2", "0x31C3"], arch="Blackwell Ultra", cc="10.3"),
    _m("RTX-PRO-6000-BLACKWELL-SERVER", "RTX-PRO-6000", ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], ["0x2BB5"],
       arch="Blackwell", cc="12.0", aliases=["RTX-PRO-6000", "RTX-PRO-6000-SE", "RTX-PRO-SERVER-6000"],
       karpenter="rtx-pro-server-6000"),
    _m("RTX-PRO-6000-BLACKWELL-WS", "RTX-PRO-6000", ["NVIDIA RTX PRO 6000 Blackwell Workstation Edition"], ["0x2BB1"],
       arch="Blackwell", cc="12.0", aliases=["RTX-PRO-6000-WS"],
       note="MIG needs display mode set to compute (UG prerequisites); not in mig-parted filters"),
    _m("RTX-PRO-6000-BLACKWELL-MAXQ", "RTX-PRO-6000", ["NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"],
       ["0x2BB4"], arch="Blackwell", cc="12.0", aliases=["RTX-PRO-6000-MAXQ"],
       note="MIG needs display mode set to compute (UG prerequisites); not in mig-parted filters"),
    _m("RTX-PRO-5000-BLACKWELL", "RTX-PRO-5000", ["NVIDIA RTX PRO 5000 Blackwell"], ["0x2BB3"],
       arch="Blackwell", cc="12.0", aliases=["RTX-PRO-5000"],
       note="two MIG tables disagree between copies of NVIDIA's page; the newer 2-slice table is used (rules.md §9.3)"),
    # --- not MIG-capable (rules.md §8)
    _m("T4", None, ["Tesla T4", "NVIDIA T4"], ["0x1EB8"], arch="Turing", cc="7.5", aliases=["TESLA-T4"], karpenter="t4"),
    _m("V100-SXM2-16GB", None, ["Tesla V100-SXM2-16GB"], ["0x1DB1"], arch="Volta", cc="7.0",
       aliases=["V100-16GB"], karpenter="v100"),
    _m("V100-PCIE-16GB", None, ["Tesla V100-PCIE-16GB"], ["0x1DB4"], arch="Volta", cc="7.0"),
    _m("V100-SXM2-32GB", None, ["Tesla V100-SXM2-32GB"], ["0x1DB5"], arch="Volta", cc="7.0",
       aliases=["V100-32GB"], karpenter="v100"),
    _m("V100-PCIE-32GB", None, ["Tesla V100-PCIE-32GB"], ["0x1DB6"], arch="Volta", cc="7.0"),
    _m("A10", None, ["NVIDIA A10"], ["0x2236"], arch="Ampere", cc="8.6"),
    _m("A10G", None, ["NVIDIA A10G"], ["0x2237"], arch="Ampere", cc="8.6", karpenter="a10g"),
    _m("A40", None, ["NVIDIA A40"], ["0x2235"], arch="Ampere", cc="8.6"),
    _m("L4", None, ["NVIDIA L4"], ["0x27B8"], arch="Ada Lovelace", cc="8.9", karpenter="l4"),
    _m("L40", None, ["NVIDIA L40"], ["0x26B5"], arch="Ada Lovelace", cc="8.9"),
    _m("L40S", None, ["NVIDIA L40S"], ["0x26B9"], arch="Ada Lovelace", cc="8.9", karpenter="l40s"),
]

# Nominal board memory (GB) of the non-MIG parts; for MIG parts the memory is
# read from the whole-GPU profile name (go-nvlib names it after ceil(total GB)).
NON_MIG_MEMORY_GB = {
    "T4": 16, "V100-SXM2-16GB": 16, "V100-PCIE-16GB": 16, "V100-SXM2-32GB": 32, "V100-PCIE-32GB": 32,
    "A10": 24, "A10G": 24, "A40": 48, "L4": 24, "L40": 48, "L40S": 48,
}

_NAME_RE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:([+-])(.+))?$")
_INFERRED_FLAGS = ("placements", "memory_slices", "nvidia_smi_profile_id")


def _profile(p: dict[str, Any], table: str) -> dict[str, Any]:
    m = _NAME_RE.match(p["name"])
    if not m or m.group(1):
        raise ValueError(f"{table}: unexpected profile name {p['name']!r}")
    g = int(m.group(2))
    if g != p["compute_slices"]:
        raise ValueError(f"{table}: {p['name']} names {g}g but has {p['compute_slices']} compute slices")
    placements = [[pl["start"], pl["size"]] for pl in p["placements"]]
    if any(size != p["memory_slices"] for _, size in placements):
        raise ValueError(f"{table}: {p['name']} placement size differs from memory_slices")
    inferred = [f for f in _INFERRED_FLAGS if p.get(f"{f}_inferred")]
    media = (m.group(4) + m.group(5)) if m.group(4) else None
    index = p["nvml_profile_index"]
    return {
        "name": p["name"],
        "smi_id": p["nvidia_smi_profile_id"],
        "nvml_index": index.split(" ")[0],
        "compute_slices": p["compute_slices"],
        "memory_slices": p["memory_slices"],
        "memory_gb": int(m.group(3)),
        "max_instances": p["max_instances"],
        "placements": placements,
        "media": media,
        "min_driver": PROFILE_MIN_DRIVER.get(table, {}).get(p["name"]),
        "inferred": inferred,
        "note": p.get("note"),
    }


def build(reference: Path) -> dict[str, Any]:
    import yaml  # build-time only

    raw = reference.read_bytes()
    ref = yaml.safe_load(raw)
    tables: dict[str, Any] = {}
    ref_pci: dict[str, str] = {}  # pci id -> table key (or "" for non-MIG)
    for g in ref["gpus"]:
        key = TABLES.get(g["model"])
        if key is None:
            raise ValueError(f"reference GPU {g['model']!r} has no entry in TABLES")
        profiles = [_profile(p, key) for p in g["profiles"]]
        for rule in COMBO_MIN_DRIVER.get(key, []):
            missing = set(rule["profiles"]) - {p["name"] for p in profiles}
            if missing:
                raise ValueError(f"{key}: driver rule names unknown profiles {sorted(missing)}")
        tables[key] = {
            "reference_model": g["model"],
            "compute_slices": g["compute_slices"],
            "memory_slices": g["memory_slices"],
            "max_instances": g["max_instances"],
            "profiles": profiles,
            "combo_min_driver": COMBO_MIN_DRIVER.get(key, []),
            "sources": g.get("sources", {}),
            "inferred_fields": g.get("inferred_fields", []),
            "confidence": str(g.get("confidence", "")),
            "note": g.get("note"),
        }
        for pci in g["pci_device_ids"]:
            ref_pci[pci["id"].upper().replace("0X", "0x")] = key
    for g in ref["non_mig_gpus"]["gpus"]:
        for pci in g["pci_ids"]:
            ref_pci[pci.upper().replace("0X", "0x")] = ""
    missing_tables = set(TABLES.values()) - set(tables)
    if missing_tables:
        raise ValueError(f"TABLES names tables absent from the reference: {sorted(missing_tables)}")

    gpus = []
    claimed: dict[str, str] = {}
    for model in MODELS:
        m = dict(model)
        table = m["table"]
        for pci in m["pci_ids"]:
            if pci in claimed:
                raise ValueError(f"PCI id {pci} claimed by {claimed[pci]} and {m['key']}")
            claimed[pci] = m["key"]
            if pci not in ref_pci:
                raise ValueError(f"{m['key']}: PCI id {pci} is not in the reference")
            if ref_pci[pci] != (table or ""):
                raise ValueError(f"{m['key']}: PCI id {pci} belongs to table {ref_pci[pci]!r} in the reference")
        if table:
            t = tables[table]
            full = max(t["profiles"], key=lambda p: (p["memory_slices"], p["compute_slices"]))
            m["memory_mib"] = full["memory_gb"] * 1024
        else:
            m["memory_mib"] = NON_MIG_MEMORY_GB[m["key"]] * 1024
        m["mig_capable"] = table is not None
        m["gfd_names"] = [s.replace(" ", "-") for s in m["smi_names"]]
        gpus.append(m)
    unclaimed = set(ref_pci) - set(claimed)
    if unclaimed:
        raise ValueError(f"reference PCI ids not assigned to a model: {sorted(unclaimed)}")

    sources = {
        k: {f: v[f] for f in ("kind", "url", "repo", "path", "commit") if f in v}
        for k, v in sorted(ref["sources"].items())
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "gpuplan/catalog/build_catalog.py",
        "reference": {"file": "mig/mig-profiles.yaml", "sha256": hashlib.sha256(raw).hexdigest()},
        "sources": sources,
        "tables": tables,
        "gpus": gpus,
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def default_reference() -> Path:
    return Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "mig" / "mig-profiles.yaml"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ref = Path(args[0]) if args else default_reference()
    OUT.write_text(render(build(ref)), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
