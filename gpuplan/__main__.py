from gpuplan.cli.main import main

main()
