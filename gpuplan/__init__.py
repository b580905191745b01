"""gpuplan: a declarative GitOps config compiler for Kubernetes GPU fleets."""

__version__ = "0.1.0"
