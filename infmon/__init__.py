"""infmon: drive streaming load against an LLM inference server and watch its metrics."""

__version__ = "0.1.0"
