"""Errors of reading the local files the operator names (datasets, traces, lengths)."""

from __future__ import annotations


def read_error(exc: Exception) -> str:
    """Why a local file could not be read, in words ("No such file or directory")."""
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
