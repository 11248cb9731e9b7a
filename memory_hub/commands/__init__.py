"""CLI commands beyond the core ones in ``cli.py``, one module per stage.

Each module defines ``register(add)`` where ``add(name, func, help) -> ArgumentParser`` creates a
sub-command (with ``--json`` already added). Modules stay thin: parse, call the library, print.
"""

MODULES = ("models", "retrieval", "server", "hooks", "capture", "dream", "usage")
