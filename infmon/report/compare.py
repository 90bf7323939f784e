"""Runs side by side per concurrency step, with deltas, noise test and explanations."""

from __future__ import annotations

from typing import Any

from infmon.report import explain, noise
from infmon.report.runs import Run

SCHEMA = "infmon.compare/1"
METRICS = (  # key, label, getter path, lower is better
    ("out_tok_s", "output tok/s", ("output_throughput_tok_s",), False),
    ("ttft_p50_ms", "TTFT p50 ms", ("ttft_ms", "p50"), True),
    ("tpot_p50_ms", "TPOT p50 ms", ("tpot_ms", "p50"), True),
    ("itl_p50_ms", "ITL p50 ms", ("itl_ms", "p50"), True),
    ("e2el_p50_ms", "E2EL p50 ms", ("e2el_ms", "p50"), True),
    ("goodput_req_s", "goodput req/s", ("goodput_req_s",), False),
    ("kv_usage_max", "KV usage max", ("server", "kv_usage_max"), True),
    ("acceptance", "spec acceptance", ("server", "acceptance_rate_mean"), False),
)
NOISE = {
    "out_tok_s": None,
    "ttft_p50_ms": "ttft_ms",
    "tpot_p50_ms": "tpot_ms",
    "e2el_p50_ms": "e2el_ms",
}


def _get(d: dict[str, Any], path: tuple[str, ...]) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def step_key(step: dict[str, Any]) -> Any:
    return step.get("concurrency") if step.get("concurrency") is not None else step.get("rate")


def _rates(samples: dict[str, list[float]]) -> list[float]:
    return [
        t / (e / 1e3)
        for t, e in zip(samples.get("tokens") or [], samples.get("e2el_ms") or [], strict=False)
        if e and e > 0
    ]


def _delta(base: Run, run: Run, key: Any, metric: str, a: Any, b: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "value": b,
        "delta_pct": (100 * (b / a - 1)) if a and b is not None else None,
    }
    if metric in NOISE and key in base.samples and key in run.samples:
        sa, sb = base.samples[key], run.samples[key]
        if NOISE[metric] is None:
            ci = noise.relative_ci(_rates(sa), _rates(sb), "mean")
        else:
            ci = noise.relative_ci(sa[NOISE[metric]], sb[NOISE[metric]], "median")
        out["ci_pct"] = None if ci is None else [100 * ci[0], 100 * ci[1]]
        out["beyond_noise"] = noise.beyond_noise(ci)
    return out


def _steps(runs: list[Run]) -> list[dict[str, Any]]:
    keys: list[Any] = []
    for r in runs:
        for s in r.doc.get("steps") or []:
            if step_key(s) is not None and step_key(s) not in keys:
                keys.append(step_key(s))
    rows = []
    for key in sorted(keys, key=float):
        by_run = [{step_key(s): s for s in r.doc.get("steps") or []}.get(key) for r in runs]
        base = by_run[0] or {}
        row: dict[str, Any] = {"x": key, "runs": []}
        for run, step in zip(runs, by_run, strict=True):
            entry: dict[str, Any] = {"name": run.name, "present": step is not None}
            for metric, _, path, _ in METRICS:
                a, b = _get(base, path), _get(step or {}, path)
                entry[metric] = (
                    _delta(runs[0], run, key, metric, a, b) if run is not runs[0] else {"value": b}
                )
            row["runs"].append(entry)
        rows.append(row)
    return rows


CONFIG_ROWS = (
    (
        "model",
        lambda d: (
            (d.get("target") or {}).get("model")
            or ", ".join((d.get("server") or {}).get("models") or [])
            or None
        ),
    ),
    ("max_model_len", lambda d: (d.get("server") or {}).get("max_model_len")),
    (
        "dtype",
        lambda d: (
            (d.get("config") or {}).get("dtype")
            or ((d.get("server") or {}).get("cache_config") or {}).get("dtype")
        ),
    ),
    ("kv_num_gpu_blocks", lambda d: (d.get("server") or {}).get("kv_num_gpu_blocks")),
    ("kv_block_size_tokens", lambda d: (d.get("server") or {}).get("kv_block_size_tokens")),
    ("kv_capacity_tokens", lambda d: (d.get("server") or {}).get("kv_capacity_tokens")),
    ("cache_dtype", lambda d: (d.get("server") or {}).get("cache_dtype")),
    (
        "spec_decoding",
        lambda d: (
            f"{d['server']['spec_decode_positions']} draft positions"
            if (d.get("server") or {}).get("spec_decode_positions")
            else ("off" if (d.get("server") or {}).get("backend") else None)
        ),
    ),
    ("max_num_seqs", lambda d: (d.get("config") or {}).get("max_num_seqs")),
    ("scenario", lambda d: (d.get("config") or {}).get("scenario")),
)


def config_diff(runs: list[Run]) -> list[dict[str, Any]]:
    rows = [{"key": k, "values": [fn(r.doc) for r in runs]} for k, fn in CONFIG_ROWS]
    extra = sorted(
        {k for r in runs for k in ((r.doc.get("server") or {}).get("cache_config") or {})}
    )
    rows += [
        {
            "key": f"cache_config.{k}",
            "values": [
                ((r.doc.get("server") or {}).get("cache_config") or {}).get(k) for r in runs
            ],
        }
        for k in extra
    ]
    for row in rows:
        known = [v for v in row["values"] if v is not None]
        row["differs"] = len({str(v) for v in known}) > 1
    return [r for r in rows if any(v is not None for v in r["values"])]


def compare_runs(runs: list[Run]) -> dict[str, Any]:
    """The comparison document (``infmon compare --json``); the first run is the baseline."""
    doc = {
        "schema": SCHEMA,
        "baseline": runs[0].name,
        "runs": [
            {
                "name": r.name,
                "source": r.source,
                "knee": r.doc.get("knee"),
                "slo_max_concurrency": r.doc.get("slo_max_concurrency"),
                "quality": _quality_brief(r.doc.get("quality")),
            }
            for r in runs
        ],
        "noise_method": noise.METHOD,
        "config_diff": config_diff(runs),
        "steps": _steps(runs),
    }
    doc["explanations"] = explain.explain(runs, doc)
    doc["warnings"] = warm_cache_warnings(runs)
    return doc


def warm_cache_warnings(runs: list[Run]) -> list[str]:
    """Two runs with the same seed against the same server and no restart between them (the
    same server start time): the later one was served its prompts from a warm prefix cache."""
    out = []
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            wa, wb = a.doc.get("workload") or {}, b.doc.get("workload") or {}
            ta, tb = a.doc.get("target") or {}, b.doc.get("target") or {}
            if wa.get("seed") is None or wa.get("seed") != wb.get("seed"):
                continue
            if ta.get("url") != tb.get("url"):
                continue
            sa, sb = wa.get("server_started_s"), wb.get("server_started_s")
            if sa is not None and sb is not None and sa != sb:
                continue  # restarted in between: a cold cache for both
            how = "no restart between them" if sa is not None else "a restart cannot be told"
            out.append(
                f"{a.name} and {b.name} sent the same prompts (seed {wa['seed']}) to "
                f"{ta.get('url')} ({how}): the later run met a warm prefix cache. "
                "Rerun without --seed (a fresh seed per run) or restart the server between runs."
            )
    return out


def _quality_brief(q: dict[str, Any] | None) -> dict[str, Any] | None:
    if not q:
        return None
    return {k: q.get(k) for k in ("probes", "correct", "accuracy", "agreement")}
