"""Stage: model (docs/architecture.md)."""

