"""One module per subcommand: ``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations

import sys


def not_built_yet(name: str) -> int:
    """The honest answer of a command that does not exist yet: a message and exit 2."""
    print(f"infmon {name}: not built yet", file=sys.stderr)
    return 2
