"""How a pool's nodes come to exist: the provisioning back-ends and the predicates every

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.provisioning.pools`.

Stage: resolve (docs/architecture.md)."""
