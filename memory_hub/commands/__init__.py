"""The CLI's commands, one module per stage; ``cli.py`` registers them in this order.

Each module defines ``register(add)`` where ``add(name, func, help) -> ArgumentParser`` creates a
sub-command (with ``--vault`` and ``--json`` already added). Modules stay thin: parse, call the
library, print; what they share is in ``shell.py``.
"""

MODULES = ("vault", "search", "diagnose", "models", "retrieval", "server", "hooks", "capture", "dream", "usage",
           "note")
