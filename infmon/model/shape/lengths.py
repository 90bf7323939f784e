"""Token-length distributions for ``--prompt-tokens`` and ``--output-tokens``.

Spellings: ``128`` (fixed), ``100-200`` (uniform, both ends included), ``normal:MEAN,SD``,
``lognormal:MEDIAN,SIGMA`` (``SIGMA`` of the underlying normal, so the median is ``MEDIAN``),
``empirical:FILE`` (one length per line, or a JSON list; drawn with equal weight). Every draw
is an integer of at least 1; continuous draws are rounded and clipped to ``[1, MAX_TOKENS]``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from infmon.model.shape.files import read_error

MAX_TOKENS = 1 << 20
"""No distribution draws more than this (a typo such as ``normal:5e9,1`` stays bounded)."""
MAX_LENGTHS_FILE_BYTES = 64 * 1024 * 1024
JITTER = 0.1
"""The default output length varies by ±10 % so closed-loop streams do not run in lockstep."""


class LengthError(ValueError):
    """A length spec that cannot be used; the message is one line for the operator."""


@dataclass(frozen=True, slots=True)
class Lengths:
    """One distribution of token counts."""

    kind: str
    """"fixed", "uniform", "normal", "lognormal" or "empirical"."""
    a: float = 0.0
    """fixed: the value; uniform: low; normal: mean; lognormal: median."""
    b: float = 0.0
    """uniform: high; normal: SD; lognormal: sigma."""
    values: tuple[int, ...] = ()
    """empirical: the lengths read from the file."""
    source: str = ""
    """The spec as given (shown in reports)."""

    @property
    def fixed(self) -> bool:
        return self.kind == "fixed"

    @property
    def mean(self) -> float:
        """The distribution's mean (before rounding and clipping)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "normal":
            return self.a
        if self.kind == "lognormal":
            return self.a * math.exp(self.b**2 / 2)
        return sum(self.values) / len(self.values)

    @property
    def upper(self) -> int:
        """A practical upper bound (the 99.99th percentile for the unbounded ones)."""
        if self.kind in ("fixed", "uniform"):
            return int(max(self.a, self.b))
        if self.kind == "normal":
            return _clip(self.a + 4 * self.b)
        if self.kind == "lognormal":
            return _clip(self.a * math.exp(4 * self.b))
        return max(self.values)

    def draw(self, rng: random.Random) -> int:
        """One length (an integer in ``[1, MAX_TOKENS]``)."""
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "normal":
            return _clip(rng.gauss(self.a, self.b))
        if self.kind == "lognormal":
            return _clip(self.a * math.exp(rng.gauss(0.0, self.b)))
        return rng.choice(self.values)

    def jittered(self, fraction: float = JITTER) -> Lengths:
        """A fixed length N as uniform ``N ± fraction·N`` (other kinds already vary)."""
        if self.kind != "fixed":
            return self
        spread = round(self.a * fraction)
        if spread < 1:
            return self
        lo, hi = max(1, int(self.a) - spread), int(self.a) + spread
        return Lengths("uniform", lo, hi, source=f"{int(self.a)}±{spread}")


def _clip(x: float) -> int:
    if not math.isfinite(x):
        return MAX_TOKENS
    return max(1, min(MAX_TOKENS, round(x)))


def fixed(n: int) -> Lengths:
    return Lengths("fixed", n, n, source=str(n))


def parse_lengths(text: str | int) -> Lengths:
    """Read a length spec (see the module docstring); raises ``LengthError`` with one line."""
    spec = str(text).strip()
    kind, sep, rest = spec.partition(":")
    if sep and kind in ("normal", "lognormal"):
        return _parse_two(kind, rest, spec)
    if sep and kind == "empirical":
        return Lengths("empirical", values=read_empirical(rest), source=spec)
    lo_text, dash, hi_text = spec.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if dash else lo
    except ValueError:
        raise LengthError(
            f"not a length: {spec!r} (use 128, 100-200, normal:M,SD, lognormal:MEDIAN,SIGMA "
            "or empirical:FILE)"
        ) from None
    if lo < 1 or hi < lo or hi > MAX_TOKENS:
        raise LengthError(f"bad length {spec!r}: need 1 <= low <= high <= {MAX_TOKENS}")
    if lo == hi and not dash:
        return fixed(lo)
    return Lengths("uniform", lo, hi, source=spec)


def _parse_two(kind: str, rest: str, spec: str) -> Lengths:
    parts = rest.split(",")
    try:
        a, b = (float(p) for p in parts) if len(parts) == 2 else (math.nan, math.nan)
    except ValueError:
        a = b = math.nan
    if not (math.isfinite(a) and math.isfinite(b)) or a < 1 or b < 0 or a > MAX_TOKENS:
        name = "MEAN,SD" if kind == "normal" else "MEDIAN,SIGMA"
        raise LengthError(f"bad {kind} length {spec!r} (use {kind}:{name}, e.g. {kind}:512,64)")
    if kind == "lognormal" and b > 4:
        raise LengthError(f"bad lognormal length {spec!r}: SIGMA above 4 is not a length spread")
    return Lengths(kind, a, b, source=spec)


def read_empirical(path_text: str) -> tuple[int, ...]:
    """Lengths from a file: one integer per line (``#`` comments allowed) or a JSON list."""
    path = Path(path_text).expanduser()
    try:
        if path.exists() and not path.is_file():  # a FIFO or device would never end
            raise LengthError(f"lengths file {path} is not a regular file")
        if path.exists() and path.stat().st_size > MAX_LENGTHS_FILE_BYTES:
            raise LengthError(f"lengths file {path} is larger than 64 MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LengthError(f"cannot read lengths file {path}: {read_error(exc)}") from None
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LengthError(f"{path}: not a JSON list ({exc.msg})") from None
        if not isinstance(items, list):
            raise LengthError(f"{path}: not a JSON list")
    else:
        items = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
        items = [x for x in items if x]
    values = []
    for n, item in enumerate(items, start=1):
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise LengthError(f"{path}: item {n} is not an integer: {str(item)[:40]!r}") from None
        if not 1 <= value <= MAX_TOKENS:
            raise LengthError(f"{path}: item {n} out of range: {value}")
        values.append(value)
    if not values:
        raise LengthError(f"{path}: no lengths found")
    return tuple(values)
