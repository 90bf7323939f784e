"""Loading runs to compare: session directories, report.json files, vLLM bench results.

A run is its report document (knee, quality, configuration as recorded), its levels as the
baseline comparison reads them (``infmon.model.steps.step_levels.LevelSample``: per step the
measured requests, tokens per second of measured time, the spec counters) and its server's facts
(``infmon.model.compare.baseline.RunFacts``). From a session directory the levels are exact:
the report's own step ledger keeps them as it is built (one pass over the journal), the same
selection as the report's step table, so a comparison's figures equal the report's. A ``report.json`` (with its
``requests.csv`` beside it) or a ``vllm bench serve`` file gives what it holds: latencies per
request, throughput as the one figure recorded (no noise test for it).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from infmon.journal.reader import is_session_dir
from infmon.model.base.sanitize import clean
from infmon.model.compare.baseline import Reference, RunFacts
from infmon.model.records.measures import Latency
from infmon.model.steps.evidence import ServerEvidence
from infmon.model.steps.kv_fill import max_num_seqs_seen
from infmon.model.steps.span import CLOSED, RATE, Level, StepSpan
from infmon.model.steps.step_levels import LevelSample, StepLevel, by_level
from infmon.report.doc import SCHEMA, ReportDoc, StepEntry
from infmon.report.docjson import ReportFormatError, json_ready, parse_report
from infmon.report.stepstats import parse_slo
from infmon.report.summary import run_name


class RunLoadError(ValueError):
    """A path that is not a session, a report.json or a vLLM bench result."""


@dataclass
class Run:
    name: str
    doc: ReportDoc
    levels: tuple[LevelSample, ...] = ()
    facts: RunFacts = field(default_factory=RunFacts)
    source: str = ""

    def reference(self) -> Reference:
        """This run as a baseline for others (the monitor's ``--baseline``, bench's)."""
        return Reference(self.name, self.source, by_level(self.levels), self.facts)


def _f(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def facts_of(doc: ReportDoc) -> RunFacts:
    """The server's facts as a report recorded them."""
    server = doc.get("server") or {}
    cache = server.get("cache_config") or {}
    session = doc.get("session") or {}
    models = server.get("models") or []
    model = (models[0] if models else None) or (doc.get("target") or {}).get("model")
    k = server.get("spec_decode_positions")
    spec_k = int(k) if isinstance(k, int) else (0 if server.get("backend") else None)
    evidence = [ServerEvidence.from_dict(s.get("server_evidence")) for s in doc.get("steps") or []]
    return RunFacts(
        model=str(model) if model else None,
        spec_k=spec_k,
        cache_dtype=server.get("cache_dtype") or cache.get("cache_dtype"),
        kv_capacity_tokens=_f(server.get("kv_capacity_tokens")),
        kv_block_size=_f(server.get("kv_block_size_tokens")),
        kv_blocks=_f(server.get("kv_num_gpu_blocks")),
        gpu_memory_utilization=cache.get("gpu_memory_utilization"),
        max_model_len=_f(server.get("max_model_len")),
        max_num_seqs=max_num_seqs_seen([e for e in evidence if e is not None]),
        tokens_per_seq=_f(session.get("mean_prompt_tokens"))
        + _f(session.get("mean_output_tokens")),
        drafter=_drafter(server.get("spec_config") or {}),
    )


def _drafter(spec: Mapping[str, str]) -> str | None:
    """The drafter's model as the server's speculative config names it (vLLM's field
    ``model``, SGLang's and TensorRT-LLM's ``spec_draft_model``)."""
    for key in ("model", "draft_model", "spec_draft_model"):
        if (name := spec.get(key)) and name not in ("None", "none", ""):
            return clean(str(name), 200)
    return None


def _from_session(path: Path) -> Run:
    """A session's levels from the same ledger its report is built with (one pass)."""
    from infmon.report.summary import summary_and_steps

    raw, steps = summary_and_steps(path, levels=True)
    doc = json_ready(raw)
    return Run(_name(doc, path), doc, steps.levels(doc), facts_of(doc), str(path))


def _level(step: StepEntry) -> Level | None:
    if isinstance(c := step.get("concurrency"), (int, float)):
        return Level(CLOSED, float(c))
    if isinstance(r := step.get("rate"), (int, float)):
        return Level(RATE, float(r))
    return None


def sample_of_requests(
    step: StepEntry,
    ttft_s: list[float],
    e2el_s: list[float],
    tokens: list[float],
    itls_s: list[list[float]] | None = None,
    slo: object = None,
) -> LevelSample | None:
    """A level from per-request figures (a report's CSV, a vLLM bench file): the throughput
    is the one recorded (one bin: no noise test), ITL from per-request gaps when given."""
    level, dur = _level(step), _f(step.get("duration_s"))
    if level is None or not e2el_s:
        return None
    t, e, n = (np.asarray(x, dtype=float) for x in (ttft_s, e2el_s, tokens))
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n > 1, (e - t) / (n - 1), np.nan)
    gaps = [np.asarray(g, dtype=float) for g in itls_s or []]
    tput = _f(step.get("output_throughput_tok_s"))
    span = StepSpan(int(step.get("step") or 0), level, "bench", ())
    b = StepLevel(span, parse_slo(slo))
    counts = np.asarray([g.size + 1 for g in gaps] if gaps else [0] * e.size)
    flat = np.concatenate(gaps) if gaps else np.empty(0)
    b.add_columns(np.zeros(e.size), t, tpot, e, np.nan_to_num(n).astype(np.int64), flat, counts)
    s = b.sample(span, 0.0, ServerEvidence.from_dict(step.get("server_evidence")), metered=True)
    if not (math.isfinite(tput) and math.isfinite(dur) and dur > 0):
        return replace(s, token_bins=np.empty(0), bin_s=np.empty(0), good_bins=None)
    good = None if s.good_bins is None else np.array([sum(b.good.values())])
    return replace(
        s, duration_s=dur, token_bins=np.array([tput * dur]), bin_s=np.array([dur]), good_bins=good
    )


def _csv_levels(path: Path, doc: ReportDoc) -> tuple[LevelSample, ...]:
    rows: dict[int, tuple[list[float], list[float], list[float]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("ok") != "1" or row.get("warmup") == "1" or not row.get("e2el_ms"):
                continue
            r = rows.setdefault(int(row["step"]), ([], [], []))
            r[0].append(float(row["ttft_ms"]) / 1e3 if row.get("ttft_ms") else math.nan)
            r[1].append(float(row["e2el_ms"]) / 1e3)
            r[2].append(float(row.get("output_tokens") or "nan"))
    out = []
    slo = doc["config"].get("slo")
    for step in doc["steps"]:
        if (index := step.get("step")) in rows:
            s = sample_of_requests(step, *rows[index], slo=slo)
            if s is not None:
                out.append(s)
    return tuple(out)


def _name(doc: ReportDoc, path: Path) -> str:
    """The run's ``--label``, else its session directory's name (never the default "run")."""
    s = doc.get("session") or {}
    return run_name(s.get("label"), Path(s.get("dir") or path))


VllmResult = Mapping[str, Any]
"""A ``vllm bench serve`` result file as parsed: vLLM's format (its keys vary with its version
and options), read key by key."""


def _latency(d: VllmResult, metric: str) -> Latency:
    """One latency of a vLLM result: its mean, median and the percentiles it holds (ms)."""
    out: Latency = {"mean": d.get(f"mean_{metric}_ms"), "p50": d.get(f"median_{metric}_ms")}
    if f"p50_{metric}_ms" in d:
        out["p50"] = d[f"p50_{metric}_ms"]
    if f"p90_{metric}_ms" in d:
        out["p90"] = d[f"p90_{metric}_ms"]
    if f"p95_{metric}_ms" in d:
        out["p95"] = d[f"p95_{metric}_ms"]
    if f"p99_{metric}_ms" in d:
        out["p99"] = d[f"p99_{metric}_ms"]
    return out


def _vllm_step(d: VllmResult) -> StepEntry:
    """A vLLM result's one step: its load level, counts, throughputs and latencies."""
    rate = d.get("request_rate")
    step: StepEntry = {
        "concurrency": d.get("max_concurrency"),
        "duration_s": d.get("duration"),
        "completed": d["completed"],
        "failed": d.get("failed") or 0,
        "output_throughput_tok_s": d.get("output_throughput"),
        "request_throughput_req_s": d.get("request_throughput"),
        "goodput_req_s": d.get("request_goodput"),
        "ttft_ms": _latency(d, "ttft"),
        "tpot_ms": _latency(d, "tpot"),
        "itl_ms": _latency(d, "itl"),
        "e2el_ms": _latency(d, "e2el"),
    }
    if step["concurrency"] is None and rate not in (None, "inf", float("inf")):
        step["rate"] = float(rate)
    lat = [float(x) for x in d.get("latencies") or []]
    if lat and step["e2el_ms"].get("p50") is None:
        arr = 1e3 * np.asarray(lat)
        p50, p90, p95, p99 = (float(np.percentile(arr, q)) for q in (50, 90, 95, 99))
        step["e2el_ms"] = {
            "mean": float(arr.mean()),
            "p50": p50,
            "p90": p90,
            "p95": p95,
            "p99": p99,
        }
    return step


def from_vllm_bench(d: VllmResult, path: Path) -> Run:
    """A ``vllm bench serve --save-result`` file as a one-step run."""
    step = _vllm_step(d)
    lat = [float(x) for x in d.get("latencies") or []]
    ttfts = [float(x) for x in d.get("ttfts") or []]
    outs = [float(x) for x in d.get("output_lens") or []]
    itls = d.get("itls") if isinstance(d.get("itls"), list) else None
    sample = None
    if lat:
        sample = sample_of_requests(
            step,
            ttfts if len(ttfts) == len(lat) else [math.nan] * len(lat),
            lat,
            outs if len(outs) == len(lat) else [math.nan] * len(lat),
            itls if itls is not None and len(itls) == len(lat) else None,
        )
    label = str(d.get("label") or f"vllm-bench {d.get('date', '')}".strip())
    doc = parse_report(
        {
            "schema": SCHEMA,
            "session": {"label": label},
            "target": {"model": d.get("model_id"), "url": None, "endpoint": d.get("endpoint_type")},
            "config": {"model": d.get("model_id"), "backend": d.get("backend")},
            "steps": [step],
        },
        str(path),
    )
    doc["imported_from"] = "vllm bench serve"
    levels = (sample,) if sample is not None else ()
    return Run(label, doc, levels, facts_of(doc), str(path))


def load_run(path: Path) -> Run:
    """A session directory, a report.json (with its requests.csv when beside it), an ``infmon
    bench --json`` result or a ``vllm bench serve`` result; ``RunLoadError`` otherwise."""
    path = Path(path)
    if is_session_dir(path):
        return _from_session(path)
    if path.is_dir() and (path / "report.json").exists():
        path = path / "report.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunLoadError(f"{path}: not a session directory or JSON file ({exc})") from None
    if isinstance(d, dict) and ("schema" in d or "steps" in d):
        try:
            doc = parse_report(d, str(path))
        except ReportFormatError as exc:
            raise RunLoadError(str(exc)) from None
        csv_path = path.with_name("requests.csv")
        levels = _csv_levels(csv_path, doc) if csv_path.exists() else ()
        name = _name(doc, path.parent if path.name == "report.json" else path.with_suffix(""))
        return Run(name, doc, levels, facts_of(doc), str(path))
    if isinstance(d, dict) and "output_throughput" in d and "completed" in d:
        return from_vllm_bench(d, path)
    raise RunLoadError(f"{path}: not an infmon report, bench JSON or vllm bench serve result")
