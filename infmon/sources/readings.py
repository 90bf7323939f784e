"""One page → ``Readings``: the concepts a backend table names, as the page gives them.

``read_page`` sums the table's gauges and counters per engine label group and reads its
histograms, finished requests, cache and speculative config, GPUs and labelled families, all
still cumulative (no rates: ``canonical`` makes those from two readings). A value no counter or
gauge can take (negative, NaN, infinite) is left out, so it reads as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from infmon.model.server.families import LoraState
from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.histogram import Histogram
from infmon.sources.backends import detect, detect_version
from infmon.sources.backends.table import BackendTable
from infmon.sources.detail import read_labelled, read_lora
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


def read_histogram(page: Page, base: str) -> Histogram | None:
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
            h = read_histogram(page, base)
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
