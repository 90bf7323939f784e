"""Readings → the canonical ``ServerSnapshot``, through a window of one or two pages.

``snapshot_from`` turns one or two ``Readings`` (``infmon.sources.readings``) into a snapshot:
two give rates and window statistics (reset-aware counter increases, histogram deltas); one
gives the page's own values, histograms since start. ``restarted`` says whether the server
restarted between two readings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infmon.model.base.rates import counter_increase, ratio
from infmon.model.server.families import pd_role
from infmon.model.server.histogram import Histogram, delta, window_stat
from infmon.model.server.snapshot import (
    LATENCY_NAMES,
    EngineSnapshot,
    ServerSnapshot,
    SpecDecode,
)
from infmon.sources.backends.table import BackendTable
from infmon.sources.detail import server_detail
from infmon.sources.exposition import Page
from infmon.sources.readings import GroupKey, Readings, read_page


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
