"""One module per subcommand: ``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations
