"""A run against a baseline, against itself repeated, or A against B: deltas and noise."""
