"""Queueing engines other than Kueue, one package each (docs/architecture.md): each holds the
engine's queues (resolve), its rules (check), its objects and admission rules (lower) and what
the boundary proof asks of it (check-objects).

Stage: foundation (docs/architecture.md)."""
