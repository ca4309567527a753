"""CLI subcommands, one module each (see gpusim.cli)."""

#: subcommands registered by a module of another name; every other command lives in gpusim/commands/<name>.py
REGISTERED_BY = {"scale": "predict"}


def module_name(command: str) -> str:
    """The module (``gpusim.commands.<name>``) whose ``register()`` adds ``command``."""
    return f"{__name__}.{REGISTERED_BY.get(command, command)}"
