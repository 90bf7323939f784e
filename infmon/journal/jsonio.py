"""JSON out of the journal and the reports: strict (no NaN: a missing number is null)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from infmon.journal.safefile import write_text_atomic


@runtime_checkable
class ToDict(Protocol):
    """A value object that says itself as JSON (``ServerSnapshot``, ``StepResult`` …)."""

    def to_dict(self) -> Mapping[str, object]: ...


def _json_default(obj: object) -> object:
    if isinstance(obj, ToDict):
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


def dumps(obj: object) -> str:
    """One compact JSON line (NaN → null, objects with ``to_dict`` expanded)."""
    if isinstance(obj, ToDict) and not isinstance(obj, dict):
        obj = obj.to_dict()
    return json.dumps(
        null_nonfinite(obj), separators=(",", ":"), default=_json_default, allow_nan=False
    )


def write_json_atomic(path: Path, obj: object) -> None:
    """Strict JSON written safely (``safefile``: a fresh temporary name, renamed in)."""
    text = json.dumps(null_nonfinite(obj), indent=2, default=_json_default, allow_nan=False)
    write_text_atomic(path, text + "\n")
