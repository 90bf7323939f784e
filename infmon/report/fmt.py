"""Number formatting shared by the reports and the CLI (missing values show as —): counts
with thousands separators (``62,570``), fractions as percentages
(``7.5%``), durations in the unit that reads (``64 ms``, ``1.17 s``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from infmon.journal.events import BaselineSet, Note
from infmon.model.records.measures import PromptLengths
from infmon.model.steps.span import RATE, REPLAY
from infmon.report.doc import EventMark, MemoryBudget, ReportDoc, StepEntry

DASH = "—"


def num(v: object, digits: int = 1) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return DASH
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def _number(v: object) -> float | None:
    """``v`` itself when it is a finite number (not a bool), else None."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return v
    return None


def pct(value: object, digits: int | None = None) -> str:
    """A fraction as a percentage: one decimal below 10 % (``7.5%``), none above (``64%``)."""
    v = _number(value)
    if v is None:
        return DASH
    x = 100 * v
    if digits is None:
        digits = 1 if 0 < abs(x) < 9.95 else 0
    return f"{x:.{digits}f}%"


def count(value: object) -> str:
    """A count or token total with thousands separators: ``62,570``, ``3,493,012``."""
    v = _number(value)
    if v is None:
        return DASH
    return f"{v:,.0f}" if v == int(v) or abs(v) >= 100 else f"{v:,.3g}"


def rate(value: object) -> str:
    """A per-second rate: ``1,234``, ``58.7``, ``0.42``."""
    v = _number(value)
    if v is None:
        return DASH
    if abs(v) >= 100:
        return count(v)
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2g}" if v else "0"


def seconds(value: object) -> str:
    """A duration given in seconds: ``0.4 ms``, ``64 ms``, ``1.17 s``, ``2,345 s``."""
    v = _number(value)
    if v is None:
        return DASH
    if abs(v) < 1.0:
        ms = v * 1e3
        return f"{ms:.2g} ms" if abs(ms) < 10 else f"{ms:.0f} ms"
    return f"{v:.3g} s" if abs(v) < 100 else f"{v:,.0f} s"


def lat(step: StepEntry, key: str, q: str) -> str:
    """One percentile ``q`` of the step's latency ``key`` (``ttft_ms``…) in ms."""
    latency = step.get(key)
    return num(latency.get(q) if isinstance(latency, dict) else None)


def x_of(step: StepEntry) -> str:
    """The step's level; "(partial)" when it did not run its whole time (a stop cut it)."""
    tail = " (partial)" if step.get("complete") is False else ""
    if step.get("concurrency") is not None:
        return f"{step['concurrency']:,}{tail}"
    if step.get("rate") is not None:
        return f"{step['rate']}/s{tail}"
    return DASH + tail


STEP_HEADER = (
    "c / rate",
    "s",
    "ok",
    "fail",
    "out tok/s",
    "req/s",
    "goodput",
    "TTFT p50/p90/p99 ms",
    "TPOT p50/p90 ms",
    "ITL p50/p99 ms",
    "E2EL p50/p90 s",
    "achieved c",
    "loop lag p99 ms",
    "KV max",
    "waiting max",
    "accept",
    "prompt asked / counted",
    "prefix hits",
)


def step_row(s: StepEntry) -> list[str]:
    srv = s.get("server") or {}
    e2el = s.get("e2el_ms") or {}
    sec = [
        v / 1e3 if isinstance(v, (int, float)) else None for v in (e2el.get("p50"), e2el.get("p90"))
    ]
    return [
        x_of(s),
        num(s.get("duration_s")),
        num(s.get("completed")),
        num(s.get("failed")),
        num(s.get("output_throughput_tok_s")),
        num(s.get("request_throughput_req_s"), 2),
        num(s.get("goodput_req_s"), 2),
        f"{lat(s, 'ttft_ms', 'p50')} / {lat(s, 'ttft_ms', 'p90')} / {lat(s, 'ttft_ms', 'p99')}",
        f"{lat(s, 'tpot_ms', 'p50')} / {lat(s, 'tpot_ms', 'p90')}",
        f"{lat(s, 'itl_ms', 'p50')} / {lat(s, 'itl_ms', 'p99')}",
        f"{num(sec[0], 2)} / {num(sec[1], 2)}",
        num(s.get("achieved_concurrency")),
        num(s.get("loop_lag_p99_ms")),
        pct(srv.get("kv_usage_max")),
        num(srv.get("waiting_max"), 0),
        pct(srv.get("acceptance_rate_mean")),
        _prompt_cell(s.get("prompt_lengths") or {}),
        pct(srv.get("prefix_hit_rate")),
    ]


def _prompt_cell(p: PromptLengths) -> str:
    """Requested mean / server-counted mean (p50, p99) prompt tokens."""
    if not p.get("count"):
        return DASH
    return (
        f"{num(p.get('requested_mean'))} / {num(p.get('counted_mean'))} "
        f"(p50 {num(p.get('counted_p50'), 0)}, p99 {num(p.get('counted_p99'), 0)})"
    )


def mark_text(e: EventMark) -> str:
    """An event of the report's list as its line reads: ``mark: the note`` (the journal keeps
    a mark's note under ``note``), ``baseline: step 3``, a step's level (``c=16``)."""
    kind = str(e.get("kind") or "")
    if (mark := Note.from_payload(e)) is not None and mark.kind == "mark" and mark.note:
        return f"mark: {mark.note}"
    if kind == "mark":  # no note (an old journal kept it under ``label``)
        note = e.get("label")
        return f"mark: {note}" if note else "mark"
    if (base := BaselineSet.from_payload(e)) is not None:
        return f"baseline: step {base.step}" if base.step is not None else "baseline"
    if kind in ("step_begin", "step_start"):
        mode, level = e.get("mode"), e.get("level", e.get("concurrency", e.get("rate")))
        if not isinstance(level, (int, float)):
            return "step"
        if mode == REPLAY:
            return "replay"
        rate = mode == RATE or (mode is None and e.get("rate") is not None)
        return f"{level:g} req/s" if rate else f"c={level:g}"
    return kind


def server_rows(doc: ReportDoc) -> list[tuple[str, str]]:
    cfg, target = doc.get("server") or {}, doc.get("target") or {}
    mb: MemoryBudget | dict[str, None] = doc.get("memory_budget") or {}
    model = target.get("model")
    models = cfg.get("models") or ([model] if model else [])
    eps = target.get("endpoints") or []
    rows = [
        ("URL", str(target.get("url") or DASH)),
        *[
            (
                f"endpoint {i}",
                f"{e['url']}: {num(e['requests'])} requests, {num(e['failed'])} failed",
            )
            for i, e in enumerate(eps)
        ],
        ("model", ", ".join(map(str, models)) or DASH),
        (
            "backend",
            " ".join(str(v) for v in (cfg.get("backend"), cfg.get("backend_version")) if v) or DASH,
        ),
        ("max_model_len", num(cfg.get("max_model_len"))),
        (
            "KV blocks × block size",
            f"{num(cfg.get('kv_num_gpu_blocks'))} × {num(cfg.get('kv_block_size_tokens'))}",
        ),
        (
            "KV capacity",
            f"{num(mb.get('kv_capacity_tokens'))} tokens ≈ "
            f"{num(mb.get('kv_capacity_seqs'))} sequences of "
            f"{num(mb.get('tokens_per_seq'), 0)} tokens",
        ),
        ("cache dtype", str(cfg.get("cache_dtype") or DASH)),
        (
            "speculative decoding",
            f"{cfg['spec_decode_positions']} draft positions"
            if cfg.get("spec_decode_positions")
            else DASH,
        ),
    ]
    for key in ("dtype", "quantization", "max_num_seqs", "scenario"):
        value = (doc.get("config") or {}).get(key)
        if value is not None:
            rows.append((key, str(value)))
    return rows


def concurrency_axis(steps: Sequence[StepEntry]) -> tuple[float, ...] | None:
    """Each step's concurrency, for a chart against it; None when a step has none (a rate)."""
    xs = tuple(c for s in steps if isinstance(c := s.get("concurrency"), (int, float)))
    return xs if len(xs) == len(steps) else None
