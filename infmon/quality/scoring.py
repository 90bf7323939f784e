"""Scoring probe answers, and drift of one run's outputs against a baseline run's."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infmon.quality.probes import Probe

_STRIP = string.whitespace + string.punctuation.replace("{", "").replace("}", "") + "“”‘’"


def normalise(text: str) -> str:
    """Lower case, single spaces, no surrounding punctuation or quotes."""
    return " ".join(text.lower().split()).strip(_STRIP)


def is_correct(probe: Probe, output: str) -> bool:
    out = output.strip()
    if probe.match == "exact":
        return out == probe.expect.strip()
    if probe.match == "regex":
        try:
            return re.search(probe.expect, out) is not None
        except re.error:
            return False
    return normalise(out) == normalise(probe.expect)


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first differing character, None when equal."""
    if a == b:
        return None
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


@dataclass(frozen=True)
class Drift:
    compared: int
    agreement: float | None
    """Share of probes whose output equals the baseline's (after trimming whitespace)."""
    length_ratio: float | None
    """Total output length over the baseline's, on the compared probes."""
    divergences: dict[str, int]
    """Probe id → first differing character, for probes that disagree."""


def drift(results: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> Drift:
    """Compare per-probe outputs (dicts with ``id`` and ``output``) with a baseline run's."""
    base = {r["id"]: r.get("output") for r in baseline if r.get("output") is not None}
    same = total = len_a = len_b = 0
    div: dict[str, int] = {}
    for r in results:
        out, ref = r.get("output"), base.get(r["id"])
        if out is None or ref is None:
            continue
        total += 1
        a, b = out.strip(), ref.strip()
        len_a += len(a)
        len_b += len(b)
        pos = first_divergence(a, b)
        if pos is None:
            same += 1
        else:
            div[r["id"]] = pos
    return Drift(total, same / total if total else None, len_a / len_b if len_b else None, div)
