"""Cloud instance catalogs (package data).

Stage: foundation (docs/architecture.md)."""
