"""A run against its baseline, level by level: the figures, their deltas and the noise test.

``compare_level`` is the one computation behind every delta infmon shows against a baseline
(``infmon compare``'s table and explanations, ``bench --baseline``'s lines, the monitor's panes,
``--fail-if``): each figure is a statistic of the level's sample
(``infmon.model.steps.step_levels``), computed on both sides with its bootstrap interval
(``infmon.model.compare.noise``), so a delta, its interval and the word "beyond noise" always
belong together. Speculative decoding at a level is explained with
``infmon.model.compare.spec_econ``; the server's configuration with ``RunFacts``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infmon.model.base.units import latency_text
from infmon.model.compare import noise
from infmon.model.compare.spec_econ import SpecEconomics, alpha_for_tokens, economics
from infmon.model.steps.kv_fill import kv_fill_concurrency
from infmon.model.steps.span import Level
from infmon.model.steps.step_levels import LevelSample, SpecWindow, by_level

NAN = math.nan


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    """``tok_s``, ``ttft_p90`` … (the names ``--fail-if`` takes)."""
    label: str
    unit: str
    """``tok/s``, ``s`` or ``req/s``."""
    lower_is_better: bool


METRICS = (
    Metric("tok_s", "tok/s", "tok/s", False),
    Metric("ttft_p50", "TTFT p50", "s", True),
    Metric("ttft_p90", "TTFT p90", "s", True),
    Metric("tpot_p50", "TPOT p50", "s", True),
    Metric("tpot_p90", "TPOT p90", "s", True),
    Metric("itl_p50", "ITL p50", "s", True),
    Metric("itl_p90", "ITL p90", "s", True),
    Metric("e2e_p50", "E2E p50", "s", True),
    Metric("e2e_p90", "E2E p90", "s", True),
    Metric("goodput", "goodput", "req/s", False),
)
BY_KEY = {m.key: m for m in METRICS}


def statistic(key: str, s: LevelSample) -> noise.Statistic | None:
    """The statistic behind one figure of a level (None: the sample cannot give it)."""
    name, _, q = key.partition("_p")
    if key == "tok_s":
        return noise.BlockRate(s.token_bins, s.bin_s) if s.bin_s.size else None
    if key == "goodput":
        return noise.BlockRate(s.good_bins, s.bin_s) if s.good_bins is not None else None
    if name == "itl":
        return noise.PooledPercentile(s.gaps_s, s.gaps_per_request, float(q))
    values = {"ttft": s.ttft_s, "tpot": s.tpot_s, "e2e": s.e2el_s}[name]
    return noise.Percentile(values, float(q))


def _point(stat: noise.Statistic | None) -> float:
    return stat.point() if stat is not None and stat.size else NAN


@dataclass(frozen=True, slots=True)
class MetricDelta:
    metric: Metric
    delta: noise.Delta

    @property
    def better(self) -> bool | None:
        """Beyond noise and in the good direction (None: within noise or untested)."""
        if not self.delta.beyond_noise or not math.isfinite(self.delta.rel):
            return None
        return (self.delta.rel < 0) == self.metric.lower_is_better


@dataclass(frozen=True, slots=True)
class SpecLevel:
    """Speculative decoding at one level, and against the baseline there when there is one."""

    label: str
    k: int
    acceptance_rate: float
    mean_length: float
    """Tokens per engine step (the server's mean acceptance length)."""
    alpha: float
    """Per-position acceptance that gives ``mean_length`` (the economics' α)."""
    tokens_per_chunk: float
    """From the stream: output tokens / content chunks (should match ``mean_length``)."""
    itl_p50_s: float
    tpot_p50_s: float
    economics: SpecEconomics | None = None

    @property
    def itl_over_tpot(self) -> float:
        """ITL ≈ L × TPOT: this ratio should be near the mean acceptance length."""
        ok = self.tpot_p50_s > 0 and math.isfinite(self.itl_p50_s)
        return self.itl_p50_s / self.tpot_p50_s if ok else NAN


def spec_level(
    label: str, w: SpecWindow, tokens_per_chunk: float, itl_p50_s: float, tpot_p50_s: float,
    base_tpot_s: float = NAN,
) -> SpecLevel:  # fmt: skip
    econ = economics(label, w.k, w.mean_length, tpot_p50_s, base_tpot_s)
    return SpecLevel(
        label,
        w.k,
        w.acceptance_rate,
        w.mean_length,
        alpha_for_tokens(w.mean_length, w.k) if w.k else NAN,
        tokens_per_chunk,
        itl_p50_s,
        tpot_p50_s,
        econ,
    )


@dataclass(frozen=True, slots=True)
class LevelComparison:
    level: Level
    in_baseline: bool
    """False: the baseline did not run this level (figures shown alone, never interpolated)."""
    metrics: tuple[MetricDelta, ...]
    requests: int
    base_requests: int = 0
    spec: SpecLevel | None = None
    diagnosis: str | None = None
    """``c=16: spec is 3.4× slower than baseline; it would need acceptance ≥ 0.71, …``."""

    @property
    def label(self) -> str:
        return self.level.label

    def get(self, key: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.metric.key == key), None)


def compare_level(base: LevelSample | None, cur: LevelSample) -> LevelComparison:
    """``cur`` against ``base`` at the same level (see the module docstring)."""
    out = []
    for m in METRICS:
        sb = statistic(m.key, cur)
        if base is None:
            out.append(MetricDelta(m, noise.Delta(NAN, _point(sb))))
            continue
        sa = statistic(m.key, base)
        if (
            sa is None
            or sb is None
            or not (sa.size and sb.size)
            or base.client_late
            or cur.client_late
        ):
            out.append(MetricDelta(m, noise.Delta(_point(sa), _point(sb))))
        else:
            out.append(MetricDelta(m, noise.relative(sa, sb)))
    metrics = tuple(out)
    spec = diagnosis = None
    if cur.spec is not None and cur.spec.k:
        by = {d.metric.key: d.delta for d in metrics}
        spec = spec_level(
            cur.label, cur.spec, cur.tokens_per_chunk, by["itl_p50"].value,
            by["tpot_p50"].value, by["tpot_p50"].base,
        )  # fmt: skip
        econ, tpot = spec.economics, by["tpot_p50"]
        if econ is not None and not econ.pays and tpot.beyond_noise is not False:
            diagnosis = econ.verdict()
    if cur.client_late or (base is not None and base.client_late):
        which = "both runs" if cur.client_late and base and base.client_late else (
            "this run" if cur.client_late else "the baseline")  # fmt: skip
        diagnosis = (
            f"{cur.label}: the client's timestamps were late in {which} (see its self-check): "
            "deltas not tested against noise"
        )
    return LevelComparison(
        cur.level, base is not None, metrics, cur.requests,
        base.requests if base is not None else 0, spec, diagnosis,
    )  # fmt: skip


# ---- the server's configuration -------------------------------------------------------------

_QUANT = (
    (r"fp8", "fp8"),
    (r"w8a8|int8", "int8"),
    (r"awq", "awq (int4)"),
    (r"w4a16|int4", "int4"),
    (r"gptq", "gptq"),
    (r"gguf|q4_k|q8_0", "gguf"),
)


def weights_from_model_id(model: str | None) -> str | None:
    """The weights' quantisation as a model id names it (``…-FP8`` → fp8), else ``auto`` (the
    checkpoint's own dtype: servers do not publish it)."""
    if not model:
        return None
    low = model.lower()
    return next((q for pat, q in _QUANT if re.search(pat, low)), "auto")


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What a run's server said about itself (``/metrics``, ``/v1/models``), and the workload's
    mean sequence length; nan / None = not published."""

    model: str | None = None
    spec_k: int | None = None
    """Draft tokens per step; 0: no speculative decoding; None: cannot tell (no metrics)."""
    cache_dtype: str | None = None
    kv_capacity_tokens: float = NAN
    kv_block_size: float = NAN
    kv_blocks: float = NAN
    gpu_memory_utilization: str | None = None
    max_model_len: float = NAN
    max_num_seqs: float = NAN
    """Inferred (running stopped while requests waited); vLLM does not publish it."""
    tokens_per_seq: float = NAN
    drafter: str | None = None
    """The speculative drafter's model, when the server names it (``speculative_config_info``)."""

    @property
    def weights(self) -> str | None:
        return weights_from_model_id(self.model)

    @property
    def kv_fill(self) -> float:
        """Concurrent sequences of the workload's length at which KV is full."""
        return kv_fill_concurrency(
            self.kv_blocks, self.kv_block_size, self.kv_capacity_tokens, self.tokens_per_seq
        )


def _spec_text(k: int | None, drafter: str | None = None) -> str:
    if k is None:
        return "?"
    return "none" if k == 0 else f"draft k={k}" + (f" ({drafter})" if drafter else "")


def _num(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "?"


def config_changes(base: RunFacts, cur: RunFacts) -> tuple[str, ...]:
    """``dtype auto → fp8`` (by the model id), ``speculative: none → draft k=3`` …: what
    differs between two servers, as far as they tell."""
    out = []
    pairs = (
        ("dtype", base.weights, cur.weights),
        ("speculative:", _spec_text(base.spec_k), _spec_text(cur.spec_k, cur.drafter)),
        ("model", base.model, cur.model),
        ("cache dtype", base.cache_dtype, cur.cache_dtype),
        ("gpu_memory_utilization", base.gpu_memory_utilization, cur.gpu_memory_utilization),
    )
    for name, a, b in pairs:
        if a is not None and b is not None and a != b and "?" not in (a, b):
            out.append(f"{name} {a} → {b}")
    for name, x, y in (
        ("KV capacity", base.kv_capacity_tokens, cur.kv_capacity_tokens),
        ("max_model_len", base.max_model_len, cur.max_model_len),
        ("max_num_seqs ≈", base.max_num_seqs, cur.max_num_seqs),
    ):
        if math.isfinite(x) and math.isfinite(y) and x != y:
            unit = " tokens" if name == "KV capacity" else ""
            out.append(f"{name} {_num(x)} → {_num(y)}{unit}")
    return tuple(out)


LIMITS = (
    Metric("kv_capacity", "KV capacity", "tokens", False),
    Metric("kv_fill", "KV holds (max concurrency before preempting)", "seqs", False),
    Metric("max_num_seqs", "max_num_seqs (inferred)", "seqs", False),
)


def limits(base: RunFacts | None, cur: RunFacts) -> tuple[MetricDelta, ...]:
    """The exact figures (no sampling noise): KV capacity, where KV fills, max_num_seqs."""

    def pick(f: RunFacts | None, key: str) -> float:
        if f is None:
            return NAN
        return {
            "kv_capacity": f.kv_capacity_tokens,
            "kv_fill": f.kv_fill,
            "max_num_seqs": f.max_num_seqs,
        }[key]

    return tuple(MetricDelta(m, noise.exact(pick(base, m.key), pick(cur, m.key))) for m in LIMITS)


# ---- a whole run against its baseline -------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Reference:
    """The baseline run: its levels and its server's facts."""

    name: str
    source: str
    levels: Mapping[Level, LevelSample]
    facts: RunFacts = field(default_factory=RunFacts)


@dataclass(frozen=True, slots=True)
class BaselineView:
    """A run against its baseline: per level of the run, and the run-wide figures."""

    name: str
    source: str
    changes: tuple[str, ...]
    levels: tuple[LevelComparison, ...]
    limits: tuple[MetricDelta, ...]
    baseline_levels: tuple[Level, ...] = ()
    """The levels the baseline ran (those this run has not reached are not compared)."""

    @property
    def diagnosis(self) -> tuple[str, ...]:
        return tuple(c.diagnosis for c in self.levels if c.diagnosis)

    def at(self, level: Level) -> LevelComparison | None:
        return next((c for c in self.levels if c.level == level), None)


def _cache_key(s: LevelSample) -> tuple[Any, ...]:
    spec = s.spec
    return (s.level, s.step, s.requests, s.bin_s.size, float(s.token_bins.sum()), spec)


def compare_run(
    ref: Reference,
    samples: Sequence[LevelSample],
    facts: RunFacts,
    cache: dict[Any, LevelComparison] | None = None,
) -> BaselineView:
    """Every level of ``samples`` (one sample per level: the step with most requests) against
    the baseline's at the same level; ``cache`` keeps the levels whose samples did not change
    (a live run recomputes every few seconds)."""
    cur = by_level(samples)
    levels = []
    for level, s in sorted(cur.items(), key=lambda kv: (kv[0].mode, kv[0].value)):
        key = _cache_key(s)
        done = cache.get(key) if cache is not None else None
        if done is None:
            done = compare_level(ref.levels.get(level), s)
            if cache is not None:
                cache[key] = done
        levels.append(done)
    if cache is not None and len(cache) > 256:
        cache.clear()
    return BaselineView(
        ref.name,
        ref.source,
        config_changes(ref.facts, facts),
        tuple(levels),
        limits(ref.facts, facts),
        tuple(sorted(ref.levels, key=lambda lv: (lv.mode, lv.value))),
    )


def fmt_rel(d: noise.Delta) -> str:
    """``-72%`` (or ``—``): the printed delta, rounded as everywhere."""
    return f"{100 * d.rel:+.0f}%" if math.isfinite(d.rel) else "—"


def value_text(metric: Metric, value: float) -> str:
    """A figure in its display unit: latencies in ms, tok/s with thousands, req/s two places."""
    if not math.isfinite(value):
        return "—"
    if metric.unit == "s":
        return latency_text(value)
    if metric.unit == "req/s":
        return f"{value:,.2f}"
    if metric.unit == "tok/s":
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def delta_text(d: MetricDelta) -> str:
    """``15.9 -70%*``: the value, its change, and ``*`` beyond noise / ``≈`` within noise
    (nothing when untested); ``15.9 (new)`` when the baseline has no figure."""
    text = value_text(d.metric, d.delta.value)
    if not math.isfinite(d.delta.base):
        return text
    mark = {True: "*", False: "≈", None: "?"}[d.delta.beyond_noise]
    return f"{text} {fmt_rel(d.delta)}{mark}"


def unit_label(metric: Metric) -> str:
    """A column's heading: a latency's unit is said in each figure (``infmon.model.base.units``)."""
    return metric.label
