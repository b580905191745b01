"""Verify Kubernetes manifests as the API server would admit them.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.verify.verifier`.

Stage: check-objects (docs/architecture.md)."""
