"""The placement proof: where each tier's contract pod can run, and who admits it.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.placement.simulate`.

Stage: check-objects (docs/architecture.md)."""
