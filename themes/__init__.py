"""infmon's built-in colour palettes (TOML data files), shipped in the wheel as ``infmon.themes``."""
