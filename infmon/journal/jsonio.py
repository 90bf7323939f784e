"""JSON out of the journal and the reports: strict (no NaN: a missing number is null)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from infmon.journal.safefile import write_text_atomic


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)


def null_nonfinite(value: Any) -> Any:
    """JSON has no NaN: missing numbers become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): null_nonfinite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [null_nonfinite(v) for v in value]
    return value


def dumps(obj: Any) -> str:
    """One compact JSON line (NaN → null, objects with ``to_dict`` expanded)."""
    if hasattr(obj, "to_dict") and not isinstance(obj, dict):
        obj = obj.to_dict()
    return json.dumps(
        null_nonfinite(obj), separators=(",", ":"), default=_json_default, allow_nan=False
    )


def write_json_atomic(path: Path, obj: Any) -> None:
    """Strict JSON written safely (``safefile``: a fresh temporary name, renamed in)."""
    text = json.dumps(null_nonfinite(obj), indent=2, default=_json_default, allow_nan=False)
    write_text_atomic(path, text + "\n")
