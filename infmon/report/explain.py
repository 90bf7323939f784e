"""Why a run differs from the baseline, in words, from the same comparison the table shows.

Every statement about a difference reads the comparison's cells (``BaselineView``): a change
is named when, and only when, its cell is beyond noise, so the explanation can never say "no
difference" beside a table that marks one. Causes come from the server's own metrics
(DESIGN §1.3): speculative decoding's acceptance and its break-even (``spec_econ``), KV
capacity, contention (throughput fell with queue and KV unchanged), and output quality.
"""

from __future__ import annotations

import math

from infmon.model.compare.baseline import (
    METRICS,
    BaselineView,
    LevelComparison,
    MetricDelta,
    fmt_rel,
)
from infmon.model.compare.spec_econ import acceptance_text
from infmon.quality.scoring import drift
from infmon.report.runs import Run
from infmon.report.stepstats import slo_verdict_of


def _cells(view: BaselineView, key: str) -> list[tuple[LevelComparison, MetricDelta]]:
    out = []
    for c in view.levels:
        d = c.get(key)
        if c.in_baseline and d is not None:
            out.append((c, d))
    return out


def _at(cells: list[tuple[LevelComparison, MetricDelta]]) -> str:
    return ", ".join(f"{c.label}: {fmt_rel(d.delta)}" for c, d in cells)


def beyond_noise(view: BaselineView) -> list[str]:
    """``TTFT p90 -69% at c=4, …`` for every figure beyond noise, in the table's order."""
    parts = []
    for m in METRICS:
        hits = [(c, d) for c, d in _cells(view, m.key) if d.delta.beyond_noise]
        if hits:
            parts.append(
                f"{m.label} " + ", ".join(f"{fmt_rel(d.delta)} at {c.label}" for c, d in hits)
            )
    return parts


def _untested(view: BaselineView) -> int:
    return sum(
        1
        for m in METRICS
        for _, d in _cells(view, m.key)
        if d.delta.beyond_noise is None and math.isfinite(d.delta.rel)
    )


def _spec(base: Run, run: Run, view: BaselineView) -> list[str]:
    if not run.facts.spec_k or base.facts.spec_k:
        return []
    specs = [c for c in view.levels if c.in_baseline and c.spec is not None]
    if not specs:
        return []
    first = specs[0]
    s, tput = first.spec, first.get("tok_s")
    assert s is not None and tput is not None
    where = "single-stream (c=1)" if first.level.value == 1 else f"at {first.label}"
    figures = (
        f"{where} output tokens/s {tput.delta.value:.1f} vs {tput.delta.base:.1f} baseline "
        f"({fmt_rel(tput.delta)})"
    )
    head = acceptance_text(s.mean_length, s.k, run.facts.drafter)
    if tput.delta.beyond_noise and tput.delta.rel < 0:
        lines = [
            f"{run.name}: spec decoding: {head} → every step pays {s.k} drafter passes for "
            f"~{s.mean_length - 1:.2f} extra tokens; {figures}"
        ]
    elif tput.delta.beyond_noise:
        lines = [f"{run.name}: spec decoding pays off: {head}; {figures}"]
    else:
        lines = [f"{run.name}: spec decoding ({head}): no throughput difference beyond noise"]
    for c in specs:
        if c.spec is not None and c.spec.economics is not None:
            lines.append(f"{run.name}: {c.spec.economics.verdict()}")
    if s.economics is not None:
        lines.append(f"{run.name}: {s.economics.cost_line()}")
    section = run.doc.get("per_request")
    if section is not None and section["drafter_fit"]:  # each request's own acceptance
        lines.append(f"{run.name}: {section['drafter_fit']}")
    return lines


def _kv(base: Run, run: Run) -> list[str]:
    ca, cb = base.facts.kv_capacity_tokens, run.facts.kv_capacity_tokens
    if not (math.isfinite(ca) and math.isfinite(cb)) or ca <= 0 or abs(cb / ca - 1) < 0.05:
        return []
    change = 100 * (cb / ca - 1)
    why = " (drafter weights)" if change < 0 and run.facts.spec_k and not base.facts.spec_k else ""
    verb = "fell" if change < 0 else "rose"
    line = f"{run.name}: KV capacity {verb} {abs(change):.0f}%{why}: {ca:,.0f} → {cb:,.0f} tokens"
    fa, fb = base.facts.kv_fill, run.facts.kv_fill
    if math.isfinite(fa) and math.isfinite(fb):
        line += f" (KV holds {fa:,.0f} → {fb:,.0f} sequences of the workload's length)"
    ka, kb = _knee_at(base), _knee_at(run)
    if ka != kb:
        line += f"; the knee moved from {ka} to {kb}"
    sa, sb = slo_verdict_of(base.doc).text(), slo_verdict_of(run.doc).text()
    if sa != sb:
        line += f"; SLO limit {sa} → {sb}"
    return [line]


def _knee_at(run: Run) -> object:
    """The concurrency of the run's knee ("none" without one), as the explanation says it."""
    knee = run.doc.get("knee")
    return knee.get("concurrency", "none") if knee else "none"


def _contention(
    run: Run, slower: list[tuple[LevelComparison, MetricDelta]], base: Run
) -> list[str]:
    if run.facts.spec_k:
        return []
    from infmon.model.steps.step_levels import by_level

    a_levels, b_levels = by_level(base.levels), by_level(run.levels)
    for c, d in slower:
        ea, eb = (
            getattr(a_levels.get(c.level), "server", None),
            getattr(b_levels.get(c.level), "server", None),
        )
        if ea is None or eb is None:
            continue
        figures = (ea.kv_usage_max, eb.kv_usage_max, ea.waiting_p50, eb.waiting_p50)
        if not all(math.isfinite(x) for x in figures):
            continue
        if (
            abs(ea.kv_usage_max - eb.kv_usage_max) < 0.05
            and abs(ea.waiting_p50 - eb.waiting_p50) < 1
        ):
            return [
                f"{run.name}: throughput fell {-100 * d.delta.rel:.0f}% at {c.label} with no "
                f"change in queue (waiting {eb.waiting_p50:.1f}) or KV ({100 * eb.kv_usage_max:.0f}%): "
                "GPU contention (another workload on the device?)"
            ]
    return []


def _quality(base: Run, run: Run) -> str | None:
    qa, qb = base.doc.get("quality"), run.doc.get("quality")
    if not qb or (accuracy := qb.get("accuracy")) is None:
        return None
    text = f"quality: accuracy {accuracy:.1%}"
    if qa and (base_accuracy := qa.get("accuracy")) is not None:
        text += f" vs {base_accuracy:.1%} baseline"
        wrong = (qb.get("probes") or 0) - (qb.get("correct") or 0)
        text += f" ({wrong} of {qb.get('probes')} probes wrong)"
        d = drift(qb.get("results") or [], qa.get("results") or [])
        if d.agreement is not None:
            text += f", agreement with baseline outputs {d.agreement:.1%}"
        if accuracy < base_accuracy:
            text = "quality cost: " + text.removeprefix("quality: ")
    return text


def explain(base: Run, run: Run, view: BaselineView) -> list[str]:
    """Plain-language lines for one run against the baseline."""
    tput = [(c, d) for c, d in _cells(view, "tok_s") if d.delta.beyond_noise]
    faster = [(c, d) for c, d in tput if d.delta.rel > 0]
    slower = [(c, d) for c, d in tput if d.delta.rel < 0]
    found = _spec(base, run, view) + _kv(base, run)
    quality = _quality(base, run)
    keys = ("dtype", "speculative:", "model", "cache dtype")
    changed = [x for x in view.changes if x.startswith(keys)]
    why = f" ({', '.join(changed)})" if changed else ""
    if faster and not slower:
        line = f"{run.name}: faster than {base.name}{why}: output tokens/s {_at(faster)}"
        found.append(line + (f"; {quality}" if quality else ""))
    elif slower:
        found += _contention(run, slower, base)
        if faster:
            found.append(f"{run.name}: faster at {_at(faster)}, slower at {_at(slower)}{why}")
        elif not found:
            found.append(
                f"{run.name}: slower than {base.name}{why} ({_at(slower)}); no server-side cause "
                "found in the recorded metrics"
            )
    parts = beyond_noise(view)
    if parts:
        found.append(f"{run.name}: beyond noise vs {base.name}: " + "; ".join(parts))
    if quality and not any(quality in f for f in found):
        found.append(f"{run.name}: {quality}")
    if not parts:
        untested = _untested(view)
        note = f" ({untested} figures without a noise test: too few samples)" if untested else ""
        found.append(f"{run.name}: no difference beyond noise from {base.name}{note}")
    return found
