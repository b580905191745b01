"""Command-line interface: thin click commands over the library.

Stage: driver (docs/architecture.md)."""
