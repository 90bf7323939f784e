"""Samples → canonical ``ServerSnapshot``, through a backend table.

Two steps: ``read_page`` pulls the table's concepts out of one page into ``Readings`` (per label
group, still cumulative); ``snapshot_from`` turns one or two ``Readings`` into a snapshot (two
give rates and window statistics; one gives the page's own values, histograms since start).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from infmon.model.base.rates import counter_increase, ratio
from infmon.model.server.families import LoraState, pd_role
from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.histogram import Histogram, delta, window_stat
from infmon.model.server.snapshot import (
    LATENCY_NAMES,
    EngineSnapshot,
    ServerSnapshot,
    SpecDecode,
)
from infmon.sources.backends import detect, detect_version
from infmon.sources.backends.table import BackendTable
from infmon.sources.detail import read_labelled, read_lora, server_detail
from infmon.sources.exposition import Page, Sample
from infmon.sources.gpu import dcgm_gpus

GroupKey = tuple[tuple[str, str], ...]
_NOT_CONFIG = {"engine", "instance", "job", "__name__", "pod", "namespace", "container"}


@dataclass(frozen=True)
class Readings:
    """The concepts of one page, cumulative, grouped by the table's engine labels."""

    backend: str | None = None
    version: str | None = None
    models: tuple[str, ...] = ()
    gauges: Mapping[str, Mapping[GroupKey, float]] = field(default_factory=dict)
    counters: Mapping[str, Mapping[GroupKey, float]] = field(default_factory=dict)
    finished: Mapping[str, float] = field(default_factory=dict)
    per_pos: Mapping[int, float] = field(default_factory=dict)
    hists: Mapping[str, Histogram] = field(default_factory=dict)
    cache_config: Mapping[str, str] = field(default_factory=dict)
    spec_config: Mapping[str, str] = field(default_factory=dict)
    """The labels of a ``*speculative_config_info`` gauge (its drafter), when published."""
    kv_by_group: Mapping[GroupKey, tuple[int | None, int | None, int | None]] = field(
        default_factory=dict
    )
    """Per cache_config series: (block size, GPU blocks, capacity tokens)."""
    gpus: tuple[GpuSnapshot, ...] = ()
    detected: str | None = None
    """The backend the page's own names point to (``--backend`` may have forced another)."""
    labelled: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    lora: LoraState | None = None
    api_cpu_s: float | None = None
    """``process_cpu_seconds_total``: the CPU seconds of the process that answered the page."""


API_CPU = "process_cpu_seconds_total"
"""prometheus_client's process collector: the CPU time of the process that served the page, which
for vLLM and SGLang is the API server (HTTP, tokenising, detokenising, streaming every token),
not the engine core's process; the simulator's is its own. Read only unlabelled (one process),
and kept out of ``counters``, whose label groups are the engines."""


def _process_cpu(page: Page) -> float | None:
    for s in page.get(API_CPU):
        if not s.labels and 0.0 <= s.value < math.inf:
            return s.value
    return None


def _first(page: Page, names: Sequence[str]) -> tuple[Sample, ...]:
    for n in names:
        found = page.get(n)
        if found:
            return found
    return ()


def _key(labels: Mapping[str, str], group_by: Sequence[str]) -> GroupKey:
    return tuple((k, labels[k]) for k in group_by if k in labels)


def _grouped(samples: Sequence[Sample], group_by: Sequence[str]) -> dict[GroupKey, float]:
    """Summed per label group; a value no counter or canonical gauge can take (negative, NaN,
    infinite) is dropped, so it shows as unknown rather than as "-5 (-5/s)"."""
    out: dict[GroupKey, float] = {}
    for s in samples:
        if not 0.0 <= s.value < math.inf:
            continue
        k = _key(s.labels, group_by)
        out[k] = out.get(k, 0.0) + s.value
    return {k: v for k, v in out.items() if v < math.inf}  # 1e308 + 1e308 is no reading


def _histogram(page: Page, base: str) -> Histogram | None:
    buckets = page.get(base + "_bucket")
    sums, counts = page.get(base + "_sum"), page.get(base + "_count")
    if not (buckets or sums or counts):
        return None
    by_le: dict[float, float] = {}
    for s in buckets:
        if not 0.0 <= s.value < math.inf:  # a negative or NaN count is no count
            continue
        le = _float_or_nan(s.labels.get("le"))
        by_le[le] = by_le.get(le, 0.0) + s.value
    bounds = tuple(sorted(b for b in by_le if b == b))
    return Histogram(
        bounds=bounds,
        cumulative=tuple(by_le[b] for b in bounds),
        sum=_valid_total(sums),
        count=_valid_total(counts),
    )


def _valid_total(samples: Sequence[Sample]) -> float | None:
    """The samples' sum; unknown when any is negative, NaN or infinite (or there are none)."""
    if not samples or not all(0.0 <= s.value < math.inf for s in samples):
        return None
    total = sum(s.value for s in samples)
    return total if total < math.inf else None


def _float_or_nan(text: str | None) -> float:
    """A bucket bound; one that is not a number (a broken page) drops its bucket."""
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


MAX_CONFIG_INT = 10**12
"""Block sizes and block counts above this are not a real server's (and 10^400 must not reach
integer arithmetic)."""


def _int(text: str | None) -> int | None:
    """A non-negative integer label (``block_size``, ``num_gpu_blocks``, a position), bounded."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return int(value) if 0 <= value <= MAX_CONFIG_INT else None


def _cache_config(
    page: Page, table: BackendTable, group_by: Sequence[str]
) -> tuple[dict[str, str], dict[GroupKey, tuple[int | None, int | None, int | None]]]:
    series = page.get(table.cache_config_info) if table.cache_config_info else ()
    config: dict[str, str] = {}
    kv: dict[GroupKey, tuple[int | None, int | None, int | None]] = {}
    for s in series:
        if not config:
            config = {k: v for k, v in s.labels.items() if k not in _NOT_CONFIG}
        bs, blocks = _int(s.labels.get("block_size")), _int(s.labels.get("num_gpu_blocks"))
        tokens = bs * blocks if bs and blocks else _int(s.labels.get("kv_cache_size_tokens"))
        kv[_key(s.labels, group_by)] = (bs, blocks, tokens)
    return config, kv


SPEC_INFO = ("vllm:speculative_config_info", "sglang:speculative_config_info",
             "speculative_config_info", "trtllm_speculative_config_info")  # fmt: skip
"""Info gauges naming the speculative config (SGLang, TensorRT-LLM, the simulator)."""


def _spec_config(page: Page) -> dict[str, str]:
    """The first speculative-config info series' labels (the drafter's model among them)."""
    for name in SPEC_INFO:
        for s in page.get(name):
            return {k: v for k, v in s.labels.items() if k not in _NOT_CONFIG}
    return {}


def _models(page: Page, table: BackendTable) -> tuple[str, ...]:
    if table.model_label is None:
        return ()
    seen: dict[str, None] = {}
    for name in page.names:
        if name.startswith(table.prefix):
            for s in page.get(name):
                m = s.labels.get(table.model_label)
                if m is not None:
                    seen[m] = None
    return tuple(seen)


def read_page(
    page: Page, table: BackendTable | None = None, group_by: Sequence[str] | None = None
) -> Readings:
    """Extract every concept of ``table`` (autodetected when None) from ``page``."""
    found = detect(page)
    table = table or found
    gpus = dcgm_gpus(page)
    if table is None:
        return Readings(gpus=gpus)
    gb = tuple(group_by if group_by is not None else table.engine_labels)
    gauges = {
        c: grouped
        for c, names in table.gauges.items()
        if (grouped := _grouped(_first(page, names), gb))  # none left: unknown, not {}
    }
    counters: dict[str, dict[GroupKey, float]] = {}
    per_pos: dict[int, float] = {}
    for concept, names in table.counters.items():
        ss = _first(page, names)
        if not ss:
            continue
        if concept == "spec_accepted_per_pos":
            for s in ss:
                pos = _int(s.labels.get(table.spec_position_label))
                if pos is not None and 0.0 <= s.value < math.inf:
                    per_pos[pos] = per_pos.get(pos, 0.0) + s.value
        if grouped := _grouped(ss, gb):
            counters[concept] = grouped
    finished: dict[str, float] = {}
    for name, label in table.finished:
        for s in page.get(name):
            if not 0.0 <= s.value < math.inf:
                continue
            reason = s.labels.get(label, "all") if label else "all"
            finished[reason] = finished.get(reason, 0.0) + s.value
    hists = {}
    for concept, bases in table.histograms.items():
        for base in bases:
            h = _histogram(page, base)
            if h is not None:
                hists[concept] = h
                break
    config, kv = _cache_config(page, table, gb)
    return Readings(
        backend=table.name,
        version=detect_version(page, table),
        models=_models(page, table),
        gauges=gauges,
        counters=counters,
        finished=finished,
        per_pos=dict(sorted(per_pos.items())),
        hists=hists,
        cache_config=config,
        spec_config=_spec_config(page),
        kv_by_group=kv,
        gpus=gpus,
        detected=found.name if found else None,
        labelled=read_labelled(page, table),
        lora=read_lora(page, table.lora_info) if table.lora_info else None,
        api_cpu_s=_process_cpu(page),
    )


def _total(groups: Mapping[GroupKey, float] | None) -> float | None:
    total = sum(groups.values()) if groups else None
    return total if total is None or total < math.inf else None


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _mean(groups: Mapping[GroupKey, float] | None) -> float | None:
    total = _total(groups)
    return None if total is None or not groups else total / len(groups)


def _increase(
    cur: Mapping[GroupKey, float] | None, prev: Mapping[GroupKey, float] | None
) -> tuple[float | None, bool]:
    """Summed per-group increase (a group new since ``prev`` counts from 0)."""
    if not cur or prev is None:
        return None, False
    total, reset = 0.0, False
    for k, v in cur.items():
        inc, r = counter_increase(prev.get(k, 0.0), v)
        total += inc or 0.0
        reset = reset or r
    return total, reset


@dataclass
class _Window:
    """The two readings behind one snapshot, and what changed between them."""

    cur: Readings
    prev: Readings | None
    window_s: float | None

    def total(self, concept: str) -> float | None:
        return _total(self.cur.counters.get(concept))

    def increase(self, concept: str) -> float | None:
        """Window increase, or the total itself when there is no previous page."""
        cur = self.cur.counters.get(concept)
        if self.prev is None:
            return _total(cur)
        return _increase(cur, self.prev.counters.get(concept))[0]

    def rate(self, concept: str) -> float | None:
        if self.prev is None or not self.window_s:
            return None
        inc = self.increase(concept)
        return None if inc is None else inc / self.window_s

    def hist(self, concept: str) -> Histogram | None:
        h = self.cur.hists.get(concept)
        if h is None or self.prev is None:
            return h
        return delta(self.prev.hists.get(concept), h)[0]


def _cpu_cores(w: _Window) -> float | None:
    """The API server's CPU over the window in cores (1.0: one core busy all the time); None
    without two pages, or across a restart of its process (the counter went down)."""
    now, before = w.cur.api_cpu_s, w.prev.api_cpu_s if w.prev is not None else None
    if now is None or before is None or not w.window_s or now < before:
        return None
    return (now - before) / w.window_s


def _kv_usage(r: Readings) -> float | None:
    return _mean(r.gauges.get("kv_cache_usage"))


def _spec(w: _Window) -> SpecDecode | None:
    c, g = w.cur.counters, w.cur.gauges
    if not any(k.startswith("spec_") for k in (*c, *g)):
        return None
    drafts, drafted, accepted = (
        w.increase(k) for k in ("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")
    )
    rate = ratio(accepted, drafted)
    if rate is None and "spec_acceptance_rate" in g:
        rate = _mean(g["spec_acceptance_rate"])
    length = None if ratio(accepted, drafts) is None else 1.0 + (accepted or 0.0) / (drafts or 1)
    if length is None and "spec_acceptance_length" in g:
        length = _mean(g["spec_acceptance_length"])
    pos = dict(w.cur.per_pos)
    if w.prev is not None:
        pos = {i: counter_increase(w.prev.per_pos.get(i, 0.0), v)[0] or 0.0 for i, v in pos.items()}
    per_pos = tuple(v / drafts for v in pos.values()) if drafts else ()
    return SpecDecode(
        drafts_total=w.total("spec_drafts"),
        draft_tokens_total=w.total("spec_draft_tokens"),
        accepted_tokens_total=w.total("spec_accepted_tokens"),
        acceptance_rate=rate,
        mean_acceptance_length=length,
        accepted_per_position_total=tuple(w.cur.per_pos.values()),
        acceptance_per_position=per_pos,
    )


def _engines(w: _Window) -> tuple[EngineSnapshot, ...]:
    r = w.cur
    keys: dict[GroupKey, None] = {}
    for groups in (*r.gauges.values(), *r.counters.values()):
        keys.update(dict.fromkeys(groups))
    out = []
    for k in keys:

        def g(
            concept: str, src: Mapping[str, Mapping[GroupKey, float]], key: GroupKey = k
        ) -> float | None:
            return src.get(concept, {}).get(key)

        def per_s(concept: str, key: GroupKey = k) -> float | None:
            if w.prev is None or not w.window_s:
                return None
            inc, _ = counter_increase(
                w.prev.counters.get(concept, {}).get(key, 0.0), g(concept, r.counters)
            )
            return None if inc is None else inc / w.window_s

        kv = [t for ck, (_, _, t) in r.kv_by_group.items() if set(ck) <= set(k) and t]
        out.append(
            EngineSnapshot(
                labels=k,
                running=g("running", r.gauges),
                waiting=g("waiting", r.gauges),
                kv_cache_usage=g("kv_cache_usage", r.gauges),
                prompt_tokens_total=g("prompt_tokens", r.counters),
                generation_tokens_total=g("generation_tokens", r.counters),
                preemptions_total=g("preemptions", r.counters),
                prompt_tokens_per_s=per_s("prompt_tokens"),
                generation_tokens_per_s=per_s("generation_tokens"),
                kv_capacity_tokens=kv[0] if len(kv) == 1 else None,
                pd_role=pd_role(g("nixl_transfers", r.counters), g("prompt_tokens", r.counters)),
            )
        )
    return tuple(out)


def _finished_per_s(w: _Window) -> float | None:
    if w.prev is None or not w.window_s or not w.cur.finished:
        return None
    inc, _ = _increase(_finished_groups(w.cur), _finished_groups(w.prev))
    return None if inc is None else inc / w.window_s


def _finished_groups(r: Readings) -> dict[GroupKey, float]:
    return {(("r", k),): v for k, v in r.finished.items()}


def restarted(cur: Readings, prev: Readings | None) -> bool:
    """The server restarted between the two pages: any counter, histogram or finished-request
    count of ``prev`` went down in ``cur`` (whether or not a snapshot field reads it)."""
    if prev is None:
        return False
    counters = (
        *((g, prev.counters.get(c)) for c, g in cur.counters.items()),
        (_finished_groups(cur), _finished_groups(prev)),
    )
    if any(_increase(now, before)[1] for now, before in counters):
        return True
    return any(delta(prev.hists.get(c), h)[1] for c, h in cur.hists.items())


def _kv_totals(r: Readings) -> tuple[int | None, int | None, int | None]:
    vals = list(r.kv_by_group.values())
    if not vals:
        return None, None, None
    sizes = {bs for bs, _, _ in vals}
    bs = sizes.pop() if len(sizes) == 1 else None
    blocks = sum(b for _, b, _ in vals if b) if all(b for _, b, _ in vals) else None
    tokens = sum(t for _, _, t in vals if t) if all(t for _, _, t in vals) else None
    return bs, blocks, tokens


def _prefix(w: _Window) -> tuple[float | None, float | None]:
    """The prefix-cache hit rate over the window, and the queries counted since start: from
    hits and queries (vLLM), hits and misses (llama.cpp: cached and evaluated prompt
    tokens), else the server's own ratio gauge (SGLang)."""
    hits, queries = w.increase("prefix_cache_hits"), w.increase("prefix_cache_queries")
    queries_total = w.total("prefix_cache_queries")
    if queries is None and hits is not None and "prefix_cache_misses" in w.cur.counters:
        misses = w.increase("prefix_cache_misses")
        queries = None if misses is None else hits + misses
        queries_total = _sum(w.total("prefix_cache_hits"), w.total("prefix_cache_misses"))
    hit_rate = ratio(hits, queries)
    if hit_rate is None and "prefix_cache_hit_rate" in w.cur.gauges:
        hit_rate = _mean(w.cur.gauges["prefix_cache_hit_rate"])
    return hit_rate, queries_total


def snapshot_from(
    cur: Readings,
    prev: Readings | None = None,
    *,
    timestamp_s: float,
    window_s: float | None = None,
    max_model_len: int | None = None,
    served_models: Sequence[str] = (),
) -> ServerSnapshot:
    """The canonical snapshot of ``cur``; with ``prev`` (``window_s`` earlier) rates and windows."""
    w = _Window(cur, prev, window_s if prev is not None else None)
    hit_rate, queries_total = _prefix(w)
    latency = {c: s for c in LATENCY_NAMES if (s := window_stat(w.hist(c))) is not None}
    bs, blocks, tokens = _kv_totals(cur)
    models = tuple(dict.fromkeys((*served_models, *cur.models)))
    return ServerSnapshot(
        timestamp_s=timestamp_s,
        backend=cur.backend,
        backend_version=cur.version,
        models=models,
        running=_total(cur.gauges.get("running")),
        waiting=_total(cur.gauges.get("waiting")),
        kv_cache_usage=_kv_usage(cur),
        prefix_cache_hit_rate=hit_rate,
        prefix_cache_hits_total=w.total("prefix_cache_hits"),
        prefix_cache_queries_total=queries_total,
        preemptions_total=w.total("preemptions"),
        preemptions_per_s=w.rate("preemptions"),
        api_server_cpu_s_total=cur.api_cpu_s,
        api_server_cpu_cores=_cpu_cores(w),
        prompt_tokens_total=w.total("prompt_tokens"),
        generation_tokens_total=w.total("generation_tokens"),
        prompt_tokens_per_s=w.rate("prompt_tokens"),
        generation_tokens_per_s=w.rate("generation_tokens"),
        requests_finished_total=dict(cur.finished),
        requests_finished_per_s=_finished_per_s(w),
        latency_s=latency,
        iteration_tokens=window_stat(w.hist("iteration_tokens")),
        spec_decode=_spec(w),
        cache_config=dict(cur.cache_config),
        spec_config=dict(cur.spec_config),
        max_model_len=max_model_len,
        kv_capacity_tokens=tokens,
        kv_block_size_tokens=bs,
        kv_num_gpu_blocks=blocks,
        engines=_engines(w),
        gpus=cur.gpus,
        window_s=w.window_s,
        server_restarted=restarted(cur, prev),
        detail=server_detail(w, cur.labelled, None if prev is None else prev.labelled, cur.lora),
    )


def snapshot_of_page(
    page: Page, table: BackendTable | None = None, *, timestamp_s: float = 0.0
) -> ServerSnapshot:
    """One page on its own: the page's values, histograms since the server started."""
    return snapshot_from(read_page(page, table), timestamp_s=timestamp_s)
