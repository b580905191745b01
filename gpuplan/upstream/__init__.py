"""The upstream APIs gpuplan targets, pinned and shipped as package data.

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.upstream.pins`.

Stage: foundation (docs/architecture.md)."""
