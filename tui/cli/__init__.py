"""The command line, one module per command group; `main.main` is the entry point."""
