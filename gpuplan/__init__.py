"""gpuplan: a declarative GitOps config compiler for Kubernetes GPU fleets.

Stage: foundation (docs/architecture.md)."""

__version__ = "0.1.0"
