"""The DRA back-end's shared facts: which pools use it, and what each tier claims.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.dra.claims`.

Stage: resolve (docs/architecture.md)."""
