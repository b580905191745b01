"""Render diagnostics once, at the edge. One small module per format.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.reporters.formats`.

Stage: driver (docs/architecture.md)."""
