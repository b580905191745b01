"""Lowering: resolved spec -> artifacts (Kubernetes objects as plain data, or text).

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.lower.driver`.

Stage: lower (docs/architecture.md)."""
