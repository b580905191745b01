"""`gpuplan probe` as a user runs it: a subprocess, exit codes, stderr."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest
import yaml

from probe_support import REPO, fixture_path
from gpuplan.probe.inventory import NodeInventory


def gpuplan(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("GPUPLAN_NVML_FAKE", None)
    e.pop("NODE_NAME", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True,
                          env=e, cwd=cwd or REPO, timeout=120)


def _nvml_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


def test_real_nvml_here():
    """On a machine without libnvidia-ml (this CI) the probe exits 5 with one
    line on stderr; with NVIDIA hardware it writes a valid inventory."""
    r = gpuplan("probe")
    assert "Traceback" not in r.stderr
    if _nvml_loadable():
        assert r.returncode in (0, 5)
        if r.returncode == 0:
            NodeInventory.model_validate(yaml.safe_load(r.stdout))
        return
    assert r.returncode == 5
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuplan probe: ")
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in lines[0]
    assert r.stdout == ""


def test_without_the_bindings(tmp_path):
    (tmp_path / "pynvml.py").write_text("raise ImportError('no bindings in this test')\n")
    r = gpuplan("probe", env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"})
    assert r.returncode == 5
    assert r.stderr.strip().splitlines() == [
        "gpuplan probe: the NVML Python bindings are not installed (pip install 'gpuplan[probe]')"
    ]


def test_fake_driver_not_loaded_exits_5():
    r = gpuplan("probe", env={"GPUPLAN_NVML_FAKE": str(fixture_path("no-driver"))})
    assert r.returncode == 5 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "gpuplan probe: the NVIDIA kernel driver is not loaded (NVML_ERROR_DRIVER_NOT_LOADED)"
    ]


def test_fake_refusing_gpu_exits_0_and_lists_errors(tmp_path):
    out = tmp_path / "deep" / "inv.json"
    r = gpuplan("probe", "--fake", str(fixture_path("t4-refusing")), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        "gpuplan probe: GPU 2: ecc not read (NVML_ERROR_CORRUPTED_INFOROM)",
        "gpuplan probe: GPU 3: cpuAffinity not read (NVML_ERROR_NO_PERMISSION)",
    ]
    inv = NodeInventory.model_validate(json.loads(out.read_text()))
    assert inv.gpu(2).errors[0].nvml_error == "NVML_ERROR_CORRUPTED_INFOROM"


def test_fake_no_gpus_exits_0_with_a_note():
    r = gpuplan("probe", "--fake", str(fixture_path("no-gpus")), "--format", "json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["gpus"] == []
    assert "0 GPUs" in r.stderr


@pytest.mark.slow
def test_node_name_from_env_and_flag():
    r = gpuplan("probe", "--fake", str(fixture_path("t4")), env={"NODE_NAME": "from-env"})
    assert yaml.safe_load(r.stdout)["metadata"]["name"] == "from-env"
    r = gpuplan("probe", "--fake", str(fixture_path("t4")), "--node-name", "from-flag", env={"NODE_NAME": "x"})
    assert yaml.safe_load(r.stdout)["metadata"]["name"] == "from-flag"


@pytest.mark.slow
def test_usage_and_write_errors(tmp_path):
    r = gpuplan("probe", "--fake", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = gpuplan("probe", "--fake", str(fixture_path("t4")), "-o", str(blocker / "x.yaml"))
    assert r.returncode == 1 and r.stderr.startswith("gpuplan probe: cannot write")
    r = gpuplan("probe", "--format", "xml")
    assert r.returncode == 2


@pytest.mark.slow
def test_output_is_byte_identical_across_hash_seeds():
    outs = {gpuplan("probe", "--fake", str(fixture_path("a100-mig")), env={"PYTHONHASHSEED": s}).stdout
            for s in ("0", "1", "12345")}
    assert len(outs) == 1 and next(iter(outs)).startswith("apiVersion: gpuplan.dev/v1alpha1\n")
