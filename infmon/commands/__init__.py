"""One module per subcommand: ``add_arguments(parser)`` and ``run(args) -> int``."""

from __future__ import annotations


class CliError(Exception):
    """A clear, one-line error for the operator; printed without a traceback, exit 2."""
