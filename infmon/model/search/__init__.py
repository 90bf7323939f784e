"""The load search: the next level to measure or the verdict, the fit, search.json."""
