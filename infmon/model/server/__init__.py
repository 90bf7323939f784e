"""The server's own metrics: the canonical snapshot, its families, health and GPUs."""
