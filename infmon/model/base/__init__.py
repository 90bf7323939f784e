"""The bottom of model: the sanitiser, latency units, counter rates, mergeable histograms, the
JSON value type."""
