"""Number formatting shared by the Markdown and HTML writers (missing values show as —)."""

from __future__ import annotations

import math
from typing import Any

DASH = "—"
LAT_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


def num(v: Any, digits: int = 1) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return DASH
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def pct(v: Any) -> str:
    return DASH if not isinstance(v, (int, float)) else f"{100 * v:.0f}%"


def lat(step: dict[str, Any], key: str, q: str) -> str:
    return num((step.get(key) or {}).get(q))


def x_of(step: dict[str, Any]) -> str:
    if step.get("concurrency") is not None:
        return str(step["concurrency"])
    if step.get("rate") is not None:
        return f"{step['rate']}/s"
    return DASH


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


def step_row(s: dict[str, Any]) -> list[str]:
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
        num(srv.get("acceptance_rate_mean"), 2),
        _prompt_cell(s.get("prompt_lengths") or {}),
        pct(srv.get("prefix_hit_rate")),
    ]


def _prompt_cell(p: dict[str, Any]) -> str:
    """Requested mean / server-counted mean (p50, p99) prompt tokens."""
    if not p.get("count"):
        return DASH
    return (
        f"{num(p.get('requested_mean'))} / {num(p.get('counted_mean'))} "
        f"(p50 {num(p.get('counted_p50'), 0)}, p99 {num(p.get('counted_p99'), 0)})"
    )


def server_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    cfg, mb = doc.get("server") or {}, doc.get("memory_budget") or {}
    target = doc.get("target") or {}
    models = cfg.get("models") or ([target["model"]] if target.get("model") else [])
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
