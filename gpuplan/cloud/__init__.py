"""Cloud instance catalogs (package data).

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.cloud.machine`.

Stage: foundation (docs/architecture.md)."""
