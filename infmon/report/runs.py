"""Loading runs to compare: session directories, report.json files, vLLM bench results.

A run is a report document plus, where the raw requests are at hand, per-step samples
(``{concurrency: {"ttft_ms": [...], "tpot_ms": [...], "e2el_ms": [...], "tokens": [...]}}``)
for the noise test.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infmon.journal.reader import is_session_dir
from infmon.model.columns import RecordColumns

SAMPLE_KEYS = ("ttft_ms", "tpot_ms", "e2el_ms", "tokens")


class RunLoadError(ValueError):
    """A path that is not a session, a report.json or a vLLM bench result."""


@dataclass
class Run:
    name: str
    doc: dict[str, Any]
    samples: dict[Any, dict[str, list[float]]] = field(default_factory=dict)
    source: str = ""


def _key(step: dict[str, Any]) -> Any:
    return step.get("concurrency") if step.get("concurrency") is not None else step.get("rate")


def _add(
    samples: dict, key: Any, ttft_ms: float, tpot_ms: float, e2el_ms: float, tokens: float
) -> None:
    s = samples.setdefault(key, {k: [] for k in SAMPLE_KEYS})
    for k, v in zip(SAMPLE_KEYS, (ttft_ms, tpot_ms, e2el_ms, tokens), strict=True):
        s[k].append(v)


def _from_session(path: Path) -> Run:
    from infmon.journal.writer import _clean
    from infmon.report import build_summary

    by_step: dict[int, dict[str, list[float]]] = {}

    def collect(c: RecordColumns) -> None:
        keep = c.take(c.ok & ~c.warmup)
        if not len(keep):
            return
        values = (1e3 * keep.ttft_s, 1e3 * keep.tpot_s, 1e3 * keep.e2el_s, keep.output_token_count)
        s = by_step.setdefault(int(keep.step[0]), {k: [] for k in SAMPLE_KEYS})
        for key, v in zip(SAMPLE_KEYS, values, strict=True):
            s[key].extend(np.asarray(v, dtype=float).tolist())

    doc = _clean(build_summary(path, collect))
    samples = {_key(s): by_step[s["step"]] for s in doc["steps"] if s.get("step") in by_step}
    return Run(_name(doc, path), doc, samples, str(path))


def _csv_samples(path: Path, doc: dict[str, Any]) -> dict[Any, dict[str, list[float]]]:
    by_step: dict[int, dict[str, list[float]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("ok") != "1" or row.get("warmup") == "1":
                continue
            vals = [
                float(row[k]) if row.get(k) else math.nan
                for k in ("ttft_ms", "tpot_ms", "e2el_ms", "output_tokens")
            ]
            _add(by_step, int(row["step"]), *vals)
    return {_key(s): by_step[s["step"]] for s in doc.get("steps", []) if s.get("step") in by_step}


def _name(doc: dict[str, Any], path: Path) -> str:
    s = doc.get("session") or {}
    return str(s.get("label") or s.get("dir") or path.stem)


def from_vllm_bench(d: dict[str, Any], path: Path) -> Run:
    """A ``vllm bench serve --save-result`` file as a one-step run."""
    rate = d.get("request_rate")
    step: dict[str, Any] = {
        "concurrency": d.get("max_concurrency"),
        "duration_s": d.get("duration"),
        "completed": d.get("completed"),
        "failed": d.get("failed"),
        "output_throughput_tok_s": d.get("output_throughput"),
        "request_throughput_req_s": d.get("request_throughput"),
        "goodput_req_s": d.get("request_goodput"),
    }
    if step["concurrency"] is None and rate not in (None, "inf", float("inf")):
        step["rate"] = float(rate)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        stats = {"mean": d.get(f"mean_{metric}_ms"), "p50": d.get(f"median_{metric}_ms")}
        stats.update(
            {
                k.split("_")[0]: v
                for k, v in d.items()
                if k.startswith("p") and k.endswith(f"_{metric}_ms")
            }
        )
        step[f"{metric}_ms"] = stats
    lat = [1e3 * x for x in d.get("latencies") or []]
    if lat and step["e2el_ms"].get("p50") is None:
        arr = np.asarray(lat)
        step["e2el_ms"] = {
            "mean": float(arr.mean()),
            **{f"p{q}": float(np.percentile(arr, q)) for q in (50, 90, 95, 99)},
        }
    samples = {}
    if lat:
        ttfts = [1e3 * x for x in d.get("ttfts") or []]
        outs = d.get("output_lens") or []
        samples[_key(step)] = {
            "ttft_ms": ttfts,
            "tpot_ms": [],
            "e2el_ms": lat,
            "tokens": [float(x) for x in outs],
        }
    doc = {
        "schema": "infmon.report/1",
        "imported_from": "vllm bench serve",
        "session": {"label": d.get("label") or f"vllm-bench {d.get('date', '')}".strip()},
        "target": {"model": d.get("model_id"), "url": None, "endpoint": d.get("endpoint_type")},
        "config": {"model": d.get("model_id"), "backend": d.get("backend")},
        "server": {},
        "steps": [step],
        "knee": None,
        "slo_max_concurrency": None,
    }
    return Run(doc["session"]["label"], doc, samples, str(path))


def load_run(path: Path) -> Run:
    path = Path(path)
    if is_session_dir(path):
        return _from_session(path)
    if path.is_dir() and (path / "report.json").exists():
        path = path / "report.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunLoadError(f"{path}: not a session directory or JSON file ({exc})") from None
    if isinstance(d, dict) and "steps" in d and isinstance(d["steps"], list):
        csv_path = path.with_name("requests.csv")
        samples = _csv_samples(csv_path, d) if csv_path.exists() else {}
        return Run(
            _name(d, path.parent if path.name == "report.json" else path), d, samples, str(path)
        )
    if isinstance(d, dict) and "output_throughput" in d and "completed" in d:
        return from_vllm_bench(d, path)
    raise RunLoadError(f"{path}: not an infmon report, bench JSON or vllm bench serve result")
