"""Stage: driver (docs/architecture.md)."""

from gpuplan.cli.main import main

main()
