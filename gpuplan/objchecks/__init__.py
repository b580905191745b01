"""Checks over generated objects: the stage after lowering.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.objchecks.driver`.

Stage: check-objects (docs/architecture.md)."""
