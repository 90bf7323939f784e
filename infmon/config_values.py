"""The config's values: each parser reads one setting's text (from the command line, an
``INFMON_*`` variable or the TOML file) into its typed value, or raises a ``ConfigError``.

``infmon.config`` maps every settable key to one of these; the report also reads a recorded
session's ``slo`` with ``parse_slo``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from infmon.model.records.measures import SLO
from infmon.model.shape.lengths import LengthError, Lengths, parse_lengths
from infmon.model.shape.schedule import ScheduleError, parse_schedule


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message is one line for the operator."""


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")


def parse_duration_s(text: str | float) -> float:
    """``500ms`` / ``2s`` / ``1.5`` (seconds) / ``1m`` → seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = _DURATION_RE.match(str(text))
    if not m:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 500ms, 2s, 1m)")
    value = float(m.group(1))
    unit = m.group(2) or "s"
    return value * {"ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def parse_slo(text: str) -> SLO:
    """``ttft=500ms,tpot=50ms,e2el=10s`` → SLO (any subset of the three)."""
    bounds: dict[str, float] = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "e2el"):
            raise ConfigError(
                f"bad --slo part {part.strip()!r} (use ttft=500ms,tpot=50ms,e2el=10s)"
            )
        bounds[f"{key}_s"] = parse_duration_s(value)
    return SLO(**bounds)


def as_lengths(text: str | int) -> Lengths:
    try:
        return parse_lengths(text)
    except LengthError as exc:
        raise ConfigError(str(exc)) from None


def as_schedule(text: Any) -> str:
    try:
        return parse_schedule(str(text)).spec
    except ScheduleError as exc:
        raise ConfigError(str(exc)) from None


def as_workload(text: Any) -> str:
    value = str(text).strip()
    if not value:
        raise ConfigError("empty workload (use corpus, synthetic or a dataset file)")
    return value.lower() if value.lower() in ("corpus", "synthetic") else value


def _whole(text: object, what: str = "an integer") -> int:
    """``text`` as an int: a whole number (TOML's ``64.0`` too), never a truncated ``2.7``,
    an ``inf`` or a boolean."""
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        raise ConfigError(f"not {what}: {text!r}")
    if isinstance(text, float) and not text.is_integer():
        raise ConfigError(f"not {what}: {text!r}")
    try:
        return int(text)
    except ValueError:  # a string that is not an integer (types, inf and nan are out above)
        raise ConfigError(f"not {what}: {text!r}") from None


def as_nonneg_int(text: str | int) -> int:
    value = _whole(text)
    if value < 0:
        raise ConfigError(f"must be >= 0: {text!r}")
    return value


def as_positive_float(text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"must be a positive number: {text!r}")
    return value


def as_int_list(text: str | int | list[Any]) -> tuple[int, ...]:
    items = text if isinstance(text, list) else str(text).split(",")
    try:
        values = tuple(int(str(x).strip()) for x in items if str(x).strip())
    except ValueError:
        raise ConfigError(f"not a list of integers: {text!r} (use e.g. 1,2,4,8)") from None
    if any(v < 1 for v in values):
        raise ConfigError(f"concurrency must be >= 1: {text!r}")
    return values


def as_float_list(text: str | float | list[Any]) -> tuple[float, ...]:
    items = text if isinstance(text, list) else str(text).split(",")
    try:
        values = tuple(float(str(x).strip()) for x in items if str(x).strip())
    except ValueError:
        raise ConfigError(f"not a list of numbers: {text!r} (use e.g. 0.5,1,2)") from None
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ConfigError(f"rates must be positive: {text!r}")
    return values


def as_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"not a boolean: {text!r}")


def as_positive_int(text: str | int) -> int:
    value = _whole(text)
    if value < 1:
        raise ConfigError(f"must be >= 1: {text!r}")
    return value


def one_of(*allowed: str) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text).strip().lower()
        if value not in allowed:
            raise ConfigError(f"{text!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def as_nonneg_duration(text: Any) -> float:
    value = parse_duration_s(text)
    if value < 0:
        raise ConfigError(f"must not be negative: {text!r}")
    return value


def as_positive_duration(text: Any) -> float:
    value = parse_duration_s(text)
    if not value > 0:
        raise ConfigError(f"must be positive: {text!r}")
    return value


_SIZE_RE = re.compile(r"^\s*([0-9]+)\s*(k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)


def parse_size_bytes(text: str | int) -> int:
    """``1048576`` / ``512KiB`` / ``16MB`` / ``1G`` → bytes (binary units: 1 MB = 1 MiB)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise ConfigError(f"not a size: {text!r} (use e.g. 1048576, 512KiB, 16MB)")
        scale = (
            {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)[0].lower()] if m.group(2) else 1
        )
        value = int(m.group(1)[:15]) * scale
    if value < 1:
        raise ConfigError(f"must be >= 1 byte: {text!r}")
    return value


def as_seed(text: Any) -> int:
    return _whole(text, "an integer seed")
