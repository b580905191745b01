"""`gpuplan import`: a draft fleet.yaml from a running cluster's objects.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.importer.pipeline`.

Stage: driver (docs/architecture.md)."""
