"""Why a run differs from the baseline: rules grounded in the server metrics (DESIGN §1.3)."""

from __future__ import annotations

from typing import Any

from infmon.quality.scoring import drift
from infmon.report.runs import Run

SLOWER, FASTER = -10.0, 10.0
"""Throughput change (%) that counts as a regression / a speed-up."""


def _cell(doc: dict[str, Any], run_idx: int, metric: str) -> list[tuple[Any, dict[str, Any]]]:
    return [
        (row["x"], row["runs"][run_idx][metric])
        for row in doc["steps"]
        if row["runs"][run_idx]["present"] and row["runs"][0]["present"]
    ]


def _mean_server(run: Run, key: str) -> float | None:
    vals = [((s.get("server") or {}).get(key)) for s in run.doc.get("steps") or []]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


def _single(doc: dict[str, Any], i: int) -> tuple[Any, float, float, float | None] | None:
    """(c, baseline tok/s, run tok/s, delta %) at the lowest common step."""
    for x, cell in _cell(doc, i, "out_tok_s"):
        base = doc["steps"][[r["x"] for r in doc["steps"]].index(x)]["runs"][0]["out_tok_s"]
        if base.get("value") and cell.get("value") is not None:
            return x, base["value"], cell["value"], cell.get("delta_pct")
    return None


def _spec(base: Run, run: Run, single: tuple | None) -> list[str]:
    acc = _mean_server(run, "acceptance_rate_mean")
    if acc is None or _mean_server(base, "acceptance_rate_mean") is not None or single is None:
        return []
    length = _mean_server(run, "mean_acceptance_length_mean")
    k = (run.doc.get("server") or {}).get("spec_decode_positions")
    c, a, b, d = single
    ltxt = f", mean acceptance length {length:.1f}" if length is not None else ""
    kdraft = f"{k} drafter passes" if k else "the drafter passes"
    extra = f"~{length - 1:.1f}" if length is not None else "few"
    if d is not None and d <= SLOWER:
        return [
            f"{run.name}: spec decoding: acceptance {acc:.2f}{ltxt} → every step pays "
            f"{kdraft} for {extra} extra tokens; single-stream (c={c}) output tokens/s "
            f"{b:.1f} vs {a:.1f} baseline ({d:+.0f}%)"
        ]
    if d is not None and d >= FASTER:
        return [
            f"{run.name}: spec decoding pays off: acceptance {acc:.2f}{ltxt}; single-stream "
            f"(c={c}) output tokens/s {b:.1f} vs {a:.1f} baseline ({d:+.0f}%)"
        ]
    return []


def _kv(base: Run, run: Run) -> list[str]:
    ca = (base.doc.get("server") or {}).get("kv_capacity_tokens")
    cb = (run.doc.get("server") or {}).get("kv_capacity_tokens")
    if not ca or not cb or abs(cb / ca - 1) < 0.05:
        return []
    change = 100 * (cb / ca - 1)
    spec_b = (run.doc.get("server") or {}).get("spec_decode_positions")
    spec_a = (base.doc.get("server") or {}).get("spec_decode_positions")
    why = " (drafter weights)" if change < 0 and spec_b and not spec_a else ""
    verb = "fell" if change < 0 else "rose"
    line = f"{run.name}: KV capacity {verb} {abs(change):.0f}%{why}: {ca:,} → {cb:,} tokens"
    ka, kb = base.doc.get("knee") or {}, run.doc.get("knee") or {}
    if ka.get("concurrency") != kb.get("concurrency"):
        line += (
            f"; the knee moved from {ka.get('concurrency', 'none')} to "
            f"{kb.get('concurrency', 'none')}"
        )
    sa, sb = base.doc.get("slo_max_concurrency"), run.doc.get("slo_max_concurrency")
    if sa != sb:
        line += f"; SLO limit {sa} → {sb}"
    return [line]


def _throughput(doc: dict[str, Any], i: int) -> tuple[list[str], list[str]]:
    """Steps (as "c=…: +x%") faster / slower beyond noise (or without a noise test)."""
    faster, slower = [], []
    for x, cell in _cell(doc, i, "out_tok_s"):
        d, sure = cell.get("delta_pct"), cell.get("beyond_noise")
        if d is None or sure is False:
            continue
        if d >= FASTER:
            faster.append(f"c={x}: {d:+.0f}%")
        elif d <= SLOWER:
            slower.append(f"c={x}: {d:+.0f}%")
    return faster, slower


def _contention(base: Run, run: Run, doc: dict[str, Any], i: int) -> list[str]:
    out = []
    if (run.doc.get("server") or {}).get("spec_decode_positions"):
        return out
    steps_a = {s.get("concurrency"): s for s in base.doc.get("steps") or []}
    steps_b = {s.get("concurrency"): s for s in run.doc.get("steps") or []}
    for x, cell in _cell(doc, i, "out_tok_s"):
        d = cell.get("delta_pct")
        if d is None or d > SLOWER or cell.get("beyond_noise") is False:
            continue
        sa, sb = (
            (steps_a.get(x) or {}).get("server") or {},
            (steps_b.get(x) or {}).get("server") or {},
        )
        kv_a, kv_b = sa.get("kv_usage_mean"), sb.get("kv_usage_mean")
        w_a, w_b = sa.get("waiting_mean"), sb.get("waiting_mean")
        if None in (kv_a, kv_b, w_a, w_b):
            continue
        if abs(kv_a - kv_b) < 0.05 and abs(w_a - w_b) < 1:
            out.append(
                f"{run.name}: throughput fell {-d:.0f}% at c={x} with no change in queue "
                f"(waiting {w_b:.1f}) or KV ({100 * kv_b:.0f}%): GPU contention (another "
                "workload on the device?)"
            )
            break
    return out


def _quality(base: Run, run: Run) -> str | None:
    qa, qb = base.doc.get("quality"), run.doc.get("quality")
    if not qb or qb.get("accuracy") is None:
        return None
    text = f"quality: accuracy {qb['accuracy']:.1%}"
    if qa and qa.get("accuracy") is not None:
        text += f" vs {qa['accuracy']:.1%} baseline"
        wrong = (qb.get("probes") or 0) - (qb.get("correct") or 0)
        text += f" ({wrong} of {qb.get('probes')} probes wrong)"
        d = drift(qb.get("results") or [], qa.get("results") or [])
        if d.agreement is not None:
            text += f", agreement with baseline outputs {d.agreement:.1%}"
        if qb["accuracy"] < qa["accuracy"]:
            text = "quality cost: " + text.removeprefix("quality: ")
    return text


def explain(runs: list[Run], doc: dict[str, Any]) -> list[str]:
    """Plain-language lines, one or more per non-baseline run."""
    lines: list[str] = []
    base = runs[0]
    for i, run in enumerate(runs[1:], 1):
        single = _single(doc, i)
        found = _spec(base, run, single) + _kv(base, run)
        faster, slower = _throughput(doc, i)
        changed = [
            r["key"] + f" {r['values'][0]} → {r['values'][i]}"
            for r in doc["config_diff"]
            if r["differs"] and r["key"] in ("dtype", "scenario", "cache_dtype")
        ]
        quality = _quality(base, run)
        if faster and not slower:
            why = f" ({', '.join(changed)})" if changed else ""
            line = f"{run.name}: faster than {base.name}{why}: output tokens/s " + ", ".join(faster)
            found.append(line + (f"; {quality}" if quality else ""))
        elif slower:
            found += _contention(base, run, doc, i)
            if not found:
                found.append(
                    f"{run.name}: slower than {base.name} ("
                    + ", ".join(slower)
                    + "); no server-side cause found in the recorded metrics"
                )
        if quality and not any(quality in f for f in found):
            found.append(f"{run.name}: {quality}")
        lines += found or [f"{run.name}: no difference beyond noise from {base.name}"]
    return lines
