"""infmon.ui: the only package that imports Textual."""
