"""The monitor in a browser: textual-serve runs a command per page under Textual's web driver."""

from __future__ import annotations


def serve(command: str, host: str, port: int) -> None:
    """Answer HTTP on ``host:port`` until interrupted; each page runs ``command``."""
    from textual_serve.server import Server

    Server(command, host=host, port=port, title="infmon").serve()
