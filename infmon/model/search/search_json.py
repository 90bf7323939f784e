"""A search's verdict as one line and as one JSON document (``search.json``, schema
``infmon.search/1``, described in ``docs/search.md``), and the check that reads it back.

Pure: builds and checks plain data; the caller writes the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import LevelFit, Probe
from infmon.model.search.policy import SearchSpec, Verdict

SEARCH_SCHEMA = "infmon.search/1"


class LevelDoc(TypedDict):
    level: float
    steps: list[int]
    requests: int
    good: int
    attainment: float | None
    fitted_attainment: float | None
    output_tok_s: float | None
    tok_s_per_user: float | None
    goodput_req_s: float | None
    slo_margin: float | None


class ProbeDoc(TypedDict):
    level: float
    step: int
    requests: int
    good: int
    attainment: float | None
    output_tok_s: float | None
    tok_s_per_user: float | None
    goodput_req_s: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    slo_margin: float | None


class SearchDoc(TypedDict):
    schema: str
    goal: str
    status: str
    mode: str
    slo: dict[str, float | None]
    attainment: float
    range: list[float]
    resolution: float
    budget: int
    found: LevelDoc | None
    bound: LevelDoc | None
    estimate: float | None
    confidence: float | None
    reason: str
    line: str
    probes: list[ProbeDoc]


def _num(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if math.isfinite(x) else None


def level_doc(f: LevelFit) -> LevelDoc:
    return {
        "level": f.level,
        "steps": [p.step for p in f.probes],
        "requests": f.requests,
        "good": f.good,
        "attainment": _num(f.attainment),
        "fitted_attainment": _num(f.fitted),
        "output_tok_s": _num(f.output_tok_s, 2),
        "tok_s_per_user": _num(f.tok_s_per_user, 3),
        "goodput_req_s": _num(f.goodput_req_s, 3),
        "slo_margin": _num(f.margin),
    }


def probe_doc(p: Probe) -> ProbeDoc:
    return {
        "level": p.level,
        "step": p.step,
        "requests": p.requests,
        "good": p.good,
        "attainment": _num(p.attainment),
        "output_tok_s": _num(p.output_tok_s, 2),
        "tok_s_per_user": _num(p.tok_s_per_user, 3),
        "goodput_req_s": _num(p.goodput_req_s, 3),
        "ttft_p90_ms": _num(p.ttft_p90_ms, 2),
        "tpot_p90_ms": _num(p.tpot_p90_ms, 3),
        "slo_margin": _num(p.margin),
    }


def slo_text(slo: SLO) -> str:
    parts = [
        f"{name}≤{v * 1e3:g}ms" if v < 10 else f"{name}≤{v:g}s"
        for name, v in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s), ("e2el", slo.e2el_s))
        if v is not None
    ]
    return ", ".join(parts) or "no SLO"


def verdict_line(spec: SearchSpec, slo: SLO, v: Verdict) -> str:
    """One line: the answer, the bracket with its figures, confidence, the probes spent."""
    lbl = "c=" if spec.integer else ""
    unit = "" if spec.integer else " req/s"
    tail = f" · {v.probes} probes"
    if v.goal == "slo":
        head = f"SLO frontier ({slo_text(slo)} for {spec.attainment:.0%} of requests): "
        if v.found is None:
            return head + f"none ({v.reason})" + tail
        if v.bound is None:
            return head + f"≥ {lbl}{v.found.level:g}{unit} ({v.reason})" + tail
        conf = "" if math.isnan(v.confidence) else f", confidence {v.confidence:.0%}"
        return (
            head
            + f"{lbl}{v.found.level:g}{unit} ({v.found.attainment:.0%} within; "
            + f"{lbl}{v.bound.level:g} {v.bound.attainment:.0%}; crossing ≈ {v.estimate:.1f}"
            + f"{conf}){' — ' + v.reason if v.status == 'budget' else ''}"
            + tail
        )
    if v.found is None:
        return f"{v.goal}: not found ({v.reason})" + tail
    return f"{v.goal}: {lbl}{v.found.level:g}{unit} ({v.reason})" + tail


def search_doc(spec: SearchSpec, slo: SLO, v: Verdict, probes: list[Probe]) -> SearchDoc:
    return {
        "schema": SEARCH_SCHEMA,
        "goal": v.goal,
        "status": v.status,
        "mode": "concurrency" if spec.integer else "rate",
        "slo": slo.to_dict(),
        "attainment": spec.attainment,
        "range": [spec.lo, spec.hi],
        "resolution": spec.resolution,
        "budget": spec.budget,
        "found": level_doc(v.found) if v.found is not None else None,
        "bound": level_doc(v.bound) if v.bound is not None else None,
        "estimate": _num(v.estimate, 3),
        "confidence": _num(v.confidence),
        "reason": v.reason,
        "line": verdict_line(spec, slo, v),
        "probes": [probe_doc(p) for p in probes],
    }


class SearchDocError(ValueError):
    """A file that is not a search verdict of this schema."""


_TYPES: dict[str, tuple[type, ...]] = {
    "schema": (str,),
    "goal": (str,),
    "status": (str,),
    "mode": (str,),
    "slo": (dict,),
    "attainment": (int, float),
    "range": (list,),
    "resolution": (int, float),
    "budget": (int,),
    "found": (dict, type(None)),
    "bound": (dict, type(None)),
    "estimate": (int, float, type(None)),
    "confidence": (int, float, type(None)),
    "reason": (str,),
    "line": (str,),
    "probes": (list,),
}
_LEVEL_KEYS = set(LevelDoc.__annotations__)
_PROBE_KEYS = set(ProbeDoc.__annotations__)


def parse_search_doc(obj: Any) -> SearchDoc:
    """``obj`` (parsed JSON) checked against the schema: every key, its type, the parts."""
    if not isinstance(obj, Mapping):
        raise SearchDocError("a search verdict is a JSON object")
    if obj.get("schema") != SEARCH_SCHEMA:
        raise SearchDocError(f"not {SEARCH_SCHEMA}: schema {obj.get('schema')!r}")
    for key, types in _TYPES.items():
        if key not in obj or not isinstance(obj[key], types) or isinstance(obj[key], bool):
            raise SearchDocError(f"{key}: missing or not {'/'.join(t.__name__ for t in types)}")
    if obj["goal"] not in ("slo", "goodput", "knee"):
        raise SearchDocError(f"goal: unknown {obj['goal']!r}")
    if obj["status"] not in ("found", "below_range", "above_range", "budget", "unmeasured"):
        raise SearchDocError(f"status: unknown {obj['status']!r}")
    for key in ("found", "bound"):
        if obj[key] is not None and set(obj[key]) != _LEVEL_KEYS:
            raise SearchDocError(f"{key}: keys {sorted(obj[key])} are not {sorted(_LEVEL_KEYS)}")
    for p in obj["probes"]:
        if not isinstance(p, Mapping) or set(p) != _PROBE_KEYS:
            raise SearchDocError(f"probes: an entry without the keys {sorted(_PROBE_KEYS)}")
    doc: SearchDoc = dict(obj)  # type: ignore[assignment]  # checked key by key above
    return doc
