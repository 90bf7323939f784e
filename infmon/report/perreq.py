"""The server's per-request view in a report: each step's latency anatomy and the drafter's
fit by task kind and by prompt length (``doc["per_request"]``), and their diagnosis lines.

Fed each step's measured records as columns (``ReportSteps.add_columns``), so the anatomy is
over the same requests as the step's latencies; acceptance is over every measured request of
the session. A session whose server sent no per-request figures has no section.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypedDict

from infmon.model.records.acceptance import AcceptanceGroup, by_prompt_length, by_task, drafter_fit
from infmon.model.records.anatomy import (
    PARTS,
    Anatomy,
    anatomy_of_columns,
    client_growth,
    front_split,
)
from infmon.model.records.columns import MISSING, RecordColumns


class PartInfo(TypedDict):
    p50_ms: float | None
    p90_ms: float | None


class UnexplainedInfo(TypedDict):
    request_id: int
    e2e_ms: float
    client_ms: float


class StepAnatomyInfo(TypedDict):
    step: int
    label: str
    requests: int
    without: int
    parts: dict[str, PartInfo]
    client: PartInfo
    client_fraction_p50: float | None
    tpot_p50_ms: float | None
    server_itl_p50_ms: float | None
    over_e2e: int
    most_client_side: list[UnexplainedInfo]
    front_api_server_ms: float | None
    """The front's mean inside the server's API process (``FrontSplit``; None: no TTFT
    histogram of the server's in the step) ..."""
    front_outside_ms: float | None
    """... and the rest of it, outside the server (HTTP, SSE, the network, the client)."""


class AcceptanceInfo(TypedDict):
    name: str
    requests: int
    drafted: int
    accepted: int
    rate: float
    mean_length: float | None
    p10: float
    p50: float
    p90: float


class PerRequestSection(TypedDict):
    steps: list[StepAnatomyInfo]
    self_check: str | None
    acceptance_by_task: list[AcceptanceInfo]
    acceptance_by_prompt_length: list[AcceptanceInfo]
    drafter_fit: str | None
    best_task: str | None
    worst_task: str | None


class PerRequestPart(TypedDict, total=False):
    per_request: PerRequestSection


def _n(x: float) -> float | None:
    return None if math.isnan(x) else x


def _part(p50: float, p90: float) -> PartInfo:
    return {"p50_ms": _n(p50), "p90_ms": _n(p90)}


def _label(cols: RecordColumns) -> tuple[str, float]:
    conc = cols.concurrency[cols.concurrency != MISSING]
    if conc.size:
        return f"c={int(conc[0])}", float(conc[0])
    rate = cols.rate[~(cols.rate != cols.rate)]
    return (f"r={rate[0]:g}", float(rate[0])) if rate.size else ("–", math.nan)


def _step_info(index: int, label: str, a: Anatomy, server_ttft_ms: float) -> StepAnatomyInfo:
    split = front_split(a, server_ttft_ms)
    return {
        "step": index,
        "label": label,
        "requests": a.requests,
        "without": a.without,
        "parts": {name: _part(q.p50_ms, q.p90_ms) for name, q in a.parts},
        "client": _part(a.client.p50_ms, a.client.p90_ms),
        "client_fraction_p50": _n(a.client_fraction_p50),
        "tpot_p50_ms": _n(a.tpot_p50_ms),
        "server_itl_p50_ms": _n(a.server_itl_p50_ms),
        "over_e2e": a.negative,
        "most_client_side": [
            {"request_id": u.request_id, "e2e_ms": u.e2e_ms, "client_ms": u.client_ms}
            for u in a.top
        ],
        "front_api_server_ms": None if split is None else _n(split.api_server_ms),
        "front_outside_ms": None if split is None else _n(split.outside_ms),
    }


def _acceptance(g: AcceptanceGroup) -> AcceptanceInfo:
    return {
        "name": g.name,
        "requests": g.requests,
        "drafted": g.drafted,
        "accepted": g.accepted,
        "rate": g.rate,
        "mean_length": _n(g.mean_length),
        "p10": g.p10,
        "p50": g.p50,
        "p90": g.p90,
    }


class PerRequestReport:
    """Collects each step's measured records; ``section()`` is the document's part."""

    def __init__(self) -> None:
        self._steps: list[tuple[int, str, float, Anatomy]] = []
        self._spec: list[RecordColumns] = []

    def add(self, index: int, cols: RecordColumns) -> None:
        if cols.server is None or not len(cols):
            return
        label, load = _label(cols)
        a = anatomy_of_columns(cols)
        if a is not None:
            self._steps.append((index, label, load, a))
        self._spec.append(cols.take(cols.ok, chunks=False))

    def section(self, server_ttft_s: Mapping[int, float] | None = None) -> PerRequestPart:
        """The part; ``server_ttft_s``: each step's server TTFT histogram mean (its server
        evidence), which splits the front (``FrontSplit``)."""
        every = RecordColumns.concat(self._spec) if self._spec else None
        tasks = by_task(every) if every is not None else ()
        if not self._steps and not tasks:
            return {}
        ttft = {i: 1e3 * t for i, t in (server_ttft_s or {}).items()}
        loaded = [(i, x, a) for i, _, x, a in self._steps if x == x]
        growth = client_growth(
            [(x, a) for _, x, a in loaded], [ttft.get(i, math.nan) for i, _, _ in loaded]
        )
        fit = drafter_fit(tasks)
        lengths = by_prompt_length(every) if every is not None else ()
        return {
            "per_request": {
                "steps": [
                    _step_info(i, label, a, ttft.get(i, math.nan)) for i, label, _, a in self._steps
                ],
                "self_check": growth.text() if growth else None,
                "acceptance_by_task": [_acceptance(g) for g in tasks],
                "acceptance_by_prompt_length": [_acceptance(g) for g in lengths],
                "drafter_fit": fit.text() if fit else None,
                "best_task": fit.best.name if fit else None,
                "worst_task": fit.worst.name if fit else None,
            }
        }


def diagnosis_lines(part: PerRequestPart) -> list[str]:
    s = part.get("per_request")
    if s is None:
        return []
    return [x for x in (s["self_check"], s["drafter_fit"]) if x]


def _ms(x: float | None) -> str:
    return "—" if x is None else (f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}")


def _rate(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


MarkdownTable = Callable[[tuple[str, ...], list[list[str]]], list[str]]


def markdown_lines(part: PerRequestPart, table: MarkdownTable) -> list[str]:
    """``## Per request (the server's view)``: the anatomy table (p50 / p90, ms) per step and
    the acceptance tables."""
    s = part.get("per_request")
    if s is None:
        return []
    out = ["## Per request (the server's own view)", ""]
    if s["steps"]:
        split = any(st.get("front_api_server_ms") is not None for st in s["steps"])
        head = ("step", "requests", *(f"{p} p50 / p90" for p in PARTS), "client-side p50 / p90")
        if split:
            head += ("front: API server / rest (means)",)
        rows = [
            [
                st["label"],
                f"{st['requests']:,}",
                *(
                    f"{_ms(st['parts'][p]['p50_ms'])} / {_ms(st['parts'][p]['p90_ms'])}"
                    for p in PARTS
                ),
                f"{_ms(st['client']['p50_ms'])} / {_ms(st['client']['p90_ms'])}",
                *(
                    [f"{_ms(st.get('front_api_server_ms'))} / {_ms(st.get('front_outside_ms'))}"]
                    if split
                    else []
                ),
            ]
            for st in s["steps"]
        ]
        out += [
            "Latency anatomy, ms (front: to the server and the first token back; tail: the "
            "stream's delivery lag beyond the engine's decode"
            + (
                "; the front split at the server's own TTFT histogram, in its API process and "
                "the rest, over the step's scrape windows"
                if split
                else ""
            )
            + "):",
            "",
            *table(head, rows),
            "",
        ]
    if s["self_check"]:
        out += [f"**Self-check:** {s['self_check']}", ""]
    for title, key in (
        ("task kind", "acceptance_by_task"),
        ("prompt length", "acceptance_by_prompt_length"),
    ):
        groups = s[key]  # type: ignore[literal-required]
        if groups:
            head = (title, "requests", "acceptance", "mean length", "per request p10 / p50 / p90")
            rows = [
                [
                    g["name"],
                    f"{g['requests']:,}",
                    _rate(g["rate"]),
                    _rate(g["mean_length"]),
                    f"{_rate(g['p10'])} / {_rate(g['p50'])} / {_rate(g['p90'])}",
                ]
                for g in groups
            ]
            out += [f"Speculative decoding by {title}:", "", *table(head, rows), ""]
    if s["drafter_fit"]:
        out += [f"**Drafter fit:** {s['drafter_fit']}", ""]
    return out
