"""The output tree: ``tree`` writes, reads and checks ``generated/`` (temp dir +
swap, record of generated files, stale and hand-edit detection); ``objdiff``
compares two rendered trees object by object. Imported lazily by the CLI.

Stage: write (docs/architecture.md)."""
