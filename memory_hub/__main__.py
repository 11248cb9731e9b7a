"""``python -m memory_hub``: the same as the ``memory-hub`` command."""

import sys

from .entry import main

sys.exit(main())
