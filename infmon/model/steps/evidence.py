"""The server's evidence for one step: what its own metrics said while the step was measured.

Taken from the canonical snapshots (live) or from the journal's copies of them (reports), by
the same functions, so the live knee and the report's knee see the same evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from infmon.model.server.snapshot import ServerSnapshot, SourceState

NAN = math.nan
WINDOW_SLACK_S = 0.05
"""A scrape's window starts at the scrape before it, give or take the scrape's own time."""


class ServerEvidenceInfo(TypedDict, total=False):
    """The server's side of a step for the knee rule (``ServerEvidence.to_dict``)."""

    samples: int
    running_p50: float | None
    running_max: float | None
    waiting_p50: float | None
    kv_usage_max: float | None
    preemptions: float | None
    generation_tokens_per_s: float | None
    api_server_cpu_cores: float | None
    server_ttft_s: float | None


@dataclass(frozen=True, slots=True)
class ServerSample:
    """The few figures of one good scrape that steps and the knee use (nan = not published)."""

    t: float
    running: float = NAN
    waiting: float = NAN
    kv_usage: float = NAN
    preemptions_total: float = NAN
    generation_tokens_total: float = NAN
    restarted: bool = False
    api_server_cpu_s: float = NAN
    ttft_count: float = NAN
    """Requests the server's TTFT histogram observed in this scrape's window ..."""
    ttft_mean_s: float = NAN
    """... their mean (vLLM: timed by its API server, from the prompt's rendering to the
    first token into its output loop) ..."""
    window_s: float = NAN
    """... and the window's length (the scrape before it, for a direct scrape)."""

    @classmethod
    def of(cls, snap: ServerSnapshot) -> ServerSample | None:
        if snap.state != SourceState.OK:
            return None
        ttft = snap.latency_s.get("ttft")
        return cls(
            snap.timestamp_s,
            _f(snap.running),
            _f(snap.waiting),
            _f(snap.kv_cache_usage),
            _f(snap.preemptions_total),
            _f(snap.generation_tokens_total),
            bool(snap.server_restarted),
            _f(snap.api_server_cpu_s_total),
            _f(ttft.count) if ttft is not None else NAN,
            _f(ttft.mean) if ttft is not None else NAN,
            _f(snap.window_s),
        )

    @classmethod
    def from_dict(cls, t: float, d: Mapping[str, Any]) -> ServerSample | None:
        """From a journal scrape (``ServerSnapshot.to_dict()`` with its None values left out)."""
        if d.get("state", SourceState.OK) != SourceState.OK:
            return None
        latency = d.get("latency_s")
        ttft = latency.get("ttft") if isinstance(latency, Mapping) else None
        ttft = ttft if isinstance(ttft, Mapping) else {}
        return cls(
            float(t),
            _f(d.get("running")),
            _f(d.get("waiting")),
            _f(d.get("kv_cache_usage")),
            _f(d.get("preemptions_total")),
            _f(d.get("generation_tokens_total")),
            bool(d.get("server_restarted", False)),
            _f(d.get("api_server_cpu_s_total")),
            _f(ttft.get("count")),
            _f(ttft.get("mean")),
            _f(d.get("window_s")),
        )


def _f(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else NAN


@dataclass(frozen=True, slots=True)
class ServerEvidence:
    """The server's side of one step (medians over the scrapes inside its measured time)."""

    samples: int
    running_p50: float = NAN
    running_max: float = NAN
    waiting_p50: float = NAN
    kv_usage_max: float = NAN
    preemptions: float = NAN
    """Preemptions counted during the step (nan when unknown or across a restart)."""
    generation_tokens_per_s: float = NAN
    """The server's generation counter over the step's first to last scrape."""
    api_server_cpu_cores: float = NAN
    """The API server's process CPU over the same span, in cores (nan: not published)."""
    server_ttft_s: float = NAN
    """The server's own TTFT histogram's mean over the scrape windows wholly inside the step
    (nan: none, or not published). vLLM times it in its API server, from the prompt's rendering
    (before tokenising) to the first token into its output loop: against the engine's queued →
    first token it shows the API server's own part of a client's TTFT."""

    def to_dict(self) -> ServerEvidenceInfo:
        def j(x: float) -> float | None:
            return None if not math.isfinite(x) else round(x, 6)

        return {
            "samples": self.samples,
            "running_p50": j(self.running_p50),
            "running_max": j(self.running_max),
            "waiting_p50": j(self.waiting_p50),
            "kv_usage_max": j(self.kv_usage_max),
            "preemptions": j(self.preemptions),
            "generation_tokens_per_s": j(self.generation_tokens_per_s),
            "api_server_cpu_cores": j(self.api_server_cpu_cores),
            "server_ttft_s": j(self.server_ttft_s),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServerEvidence | None:
        if not isinstance(d, Mapping) or not isinstance(d.get("samples"), int):
            return None
        keys = (
            "running_p50",
            "running_max",
            "waiting_p50",
            "kv_usage_max",
            "preemptions",
            "generation_tokens_per_s",
            "api_server_cpu_cores",
            "server_ttft_s",
        )
        return cls(int(d["samples"]), *(_f(d.get(k)) for k in keys))


def _median(values: list[float]) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else NAN


def _delta(first: float, last: float) -> float:
    if math.isnan(first) or math.isnan(last) or last < first:
        return NAN
    return last - first


def evidence_of(samples: Iterable[ServerSample]) -> ServerEvidence | None:
    """The evidence of the samples taken inside a step's measured time (None when none)."""
    s = list(samples)
    if not s:
        return None
    restarted = any(x.restarted for x in s[1:])
    first, last = s[0], s[-1]
    gen = cpu = NAN
    span = last.t - first.t
    if not restarted and span > 0:
        gen = _delta(first.generation_tokens_total, last.generation_tokens_total) / span
        cpu = _delta(first.api_server_cpu_s, last.api_server_cpu_s) / span
    running = [x.running for x in s]
    return ServerEvidence(
        samples=len(s),
        running_p50=_median(running),
        running_max=max((x for x in running if not math.isnan(x)), default=NAN),
        waiting_p50=_median([x.waiting for x in s]),
        kv_usage_max=max((x.kv_usage for x in s if not math.isnan(x.kv_usage)), default=NAN),
        preemptions=NAN if restarted else _delta(first.preemptions_total, last.preemptions_total),
        generation_tokens_per_s=gen,
        api_server_cpu_cores=cpu,
        server_ttft_s=_windows_mean(s),
    )


def _windows_mean(s: list[ServerSample]) -> float:
    """The TTFT histogram's mean over the windows that opened no earlier than the first
    sample (so none of them holds the step's warm-up or the level before it)."""
    total = count = 0.0
    for x in s[1:]:
        n = x.ttft_count
        if x.restarted or not (n > 0) or math.isnan(x.ttft_mean_s):
            continue
        if not (x.t - x.window_s >= s[0].t - WINDOW_SLACK_S):
            continue  # a window that reaches back before the step (or one of unknown length)
        total += n * x.ttft_mean_s
        count += n
    return total / count if count else NAN
