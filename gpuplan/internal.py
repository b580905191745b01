"""Codes for failures that are gpuplan's own fault (exit code 4).

Stage: foundation (docs/architecture.md)."""

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

INTERNAL_ERROR = Code(
    "GP900",
    "internal error",
    Severity.ERROR,
    "gpuplan itself failed. This is a bug: re-run with --debug and report the traceback.",
)

CODES = (INTERNAL_ERROR,)
