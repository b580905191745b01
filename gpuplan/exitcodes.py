"""Process exit codes (documented in README.md).

Stage: foundation (docs/architecture.md)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    INVALID = 1  # invalid input: the spec, a layout, a file gpuplan will not overwrite
    USAGE = 2  # bad command line (click's own code)
    STALE = 3  # `gpuplan check`: generated output differs from the spec
    INTERNAL = 4  # a bug in gpuplan; a traceback only with --debug
    NO_DEVICE = 5  # `gpuplan probe`: NVML or the NVIDIA driver is not available
    DRIFT = 6  # `gpuplan verify-cluster`: the cluster differs from the plan
    REJECTED = 7  # `gpuplan build`: the API server would reject the tree (GP850); nothing written
