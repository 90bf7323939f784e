"""The load engine: a controller (``LoadEngine``) and its workers, each in its own process
by default; see ARCHITECTURE.md."""
