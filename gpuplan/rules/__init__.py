"""Rule families. Each module exposes ``check(rf: ResolvedFleet) -> Iterable[Diagnostic]``

The code is in the modules (a package's ``__init__`` defines nothing); start at
:mod:`gpuplan.rules.registry`.

Stage: check (docs/architecture.md)."""
