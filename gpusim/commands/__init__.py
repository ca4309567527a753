"""CLI subcommands, one module each (see gpusim.cli)."""
