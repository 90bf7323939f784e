"""The shape of a backend table: exposed metric names → canonical concepts, as data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BackendTable:
    """How one backend (and version range) names each canonical concept.

    Every concept maps to candidate exposed sample names, tried in order; the first present on
    the page wins (newest name first, older names after).
    """

    name: str
    """Canonical backend id: ``vllm-v1``, ``vllm-v0``, ``sglang``, ``tgi``, ``llamacpp``."""
    prefix: str
    """Prefix of every metric name this backend exposes (used to detect it)."""
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """``running``, ``waiting``, ``kv_cache_usage``, ``prefix_cache_hit_rate``,
    ``spec_acceptance_rate``, ``spec_acceptance_length``."""
    counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """``prompt_tokens``, ``generation_tokens``, ``preemptions``, ``prefix_cache_hits``,
    ``prefix_cache_queries`` (or ``prefix_cache_misses``: queries are hits + misses),
    ``spec_drafts``, ``spec_draft_tokens``, ``spec_accepted_tokens``,
    ``spec_accepted_per_pos``. A name may be a histogram's ``_sum`` (TGI token counts)."""
    finished: tuple[tuple[str, str | None], ...] = ()
    """(counter name, reason label or None) for finished requests."""
    histograms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Base names (without ``_bucket``) for ``queue``, ``prefill``, ``decode``, ``ttft``,
    ``itl``, ``tpot``, ``e2e``, ``iteration_tokens``."""
    cache_config_info: str | None = None
    model_label: str | None = None
    engine_labels: tuple[str, ...] = ()
    """Labels that tell engines / models apart on one page."""
    versions: tuple[tuple[str, str], ...] = ()
    """(marker, version text): the first marker present names the version; a marker is one
    sample name or several joined by ``&`` (all must be present)."""
    default_version: str | None = None
    spec_position_label: str = "position"
    labelled: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Families read per label value: concept → (sample name, label), e.g. waiting requests
    by ``reason`` (``infmon.sources.detail``)."""
    lora_info: str | None = None
