"""Pure domain state and statistics: no I/O, no Textual."""
