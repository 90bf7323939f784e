"""KV capacity against the knee: where the KV cache fills, and which limit the knee came from.

The cache holds ``num_gpu_blocks`` blocks of ``block_size`` tokens (``cache_config_info``). A
sequence of the workload's mean prompt + output tokens takes ``ceil(tokens / block_size)``
whole blocks at its longest (vLLM allocates whole blocks), so the cache is full at about
``num_gpu_blocks // that`` concurrent sequences: past it, sequences are preempted (or wait).

A knee is then put down to one of three limits:

- **KV cache**: the server showed KV full or preemptions at or just past the knee (its own
  evidence), or, without that evidence, the predicted fill lies at or below the next level.
- **max_num_seqs**: requests waited while the running count stayed at one value (the cap as
  inferred: vLLM does not publish it).
- **compute**: throughput stopped growing with the batch not capped and KV not full: the GPU's
  arithmetic (or bandwidth) is what the extra streams wait for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.steps.evidence import ServerEvidence
from infmon.model.steps.knee import KV_FULL, QUEUE_FRACTION, Knee, KneePoint, points_of

KV, MAX_NUM_SEQS, COMPUTE = "KV cache", "max_num_seqs", "compute"


def sequence_tokens(mean_tokens: float) -> float:
    """The tokens of the workload's sequence, as every KV figure counts it: the mean prompt +
    output to the nearest whole token, halves up (nan: unknown). One rounding for the pane,
    the knee and the report, so "≈ N seqs at T tokens each" never disagrees with "KV fills
    c≈N" and N is what T tokens take in whole blocks."""
    if not (math.isfinite(mean_tokens) and mean_tokens > 0):
        return math.nan
    return float(max(1, math.floor(mean_tokens + 0.5)))


def kv_fill_concurrency(
    num_blocks: float, block_size: float, capacity_tokens: float, tokens_per_seq: float
) -> float:
    """Concurrent sequences of ``tokens_per_seq`` (``sequence_tokens``) at which the KV cache
    is full, in whole blocks when the block size is known (nan: unknown)."""
    per = sequence_tokens(tokens_per_seq)
    if math.isnan(per):
        return math.nan
    if math.isfinite(num_blocks) and math.isfinite(block_size) and block_size > 0:
        return float(num_blocks // math.ceil(per / block_size))
    if math.isfinite(capacity_tokens):
        return float(capacity_tokens // per)
    return math.nan


@dataclass(frozen=True, slots=True)
class KneeLimit:
    kind: str
    """``KV cache``, ``max_num_seqs``, ``compute`` or "" (no knee, or cannot tell)."""
    text: str


def _after(points: Sequence[KneePoint], c: float) -> KneePoint | None:
    return next((p for p in points if p.concurrency > c), None)


def _kv_full(p: KneePoint) -> bool:
    return p.kv_max >= KV_FULL or p.preemptions > 0


def _capped(p: KneePoint) -> bool:
    return p.running > 0 and p.waiting > max(1.0, QUEUE_FRACTION * p.running)


def knee_limit(
    knee: Knee | None,
    steps: Sequence[KneePoint | None],
    kv_fill: float,
    max_num_seqs: float = math.nan,
) -> KneeLimit:
    """Which limit the knee came from (see the module docstring), from the points the knee
    rule read."""
    if knee is None:
        return KneeLimit("", "")
    points = points_of(steps)
    at = next((p for p in points if p.concurrency == knee.concurrency), None)
    nxt = _after(points, knee.concurrency)
    seen = [p for p in (at, nxt) if p is not None]
    predicted = f"KV fills at c≈{kv_fill:,.0f}" if math.isfinite(kv_fill) else ""
    if any(_kv_full(p) for p in seen):
        p = next(p for p in seen if _kv_full(p))
        how = f"KV {p.kv_max:.0%}" if math.isfinite(p.kv_max) else "KV"
        if p.preemptions > 0:
            how += f", {p.preemptions:.0f} preemptions"
        return KneeLimit(KV, _join(f"KV cache: {how} at c={p.concurrency:g}", predicted))
    if any(_capped(p) for p in seen):
        p = next(p for p in seen if _capped(p))
        cap = max_num_seqs if math.isfinite(max_num_seqs) else p.running
        return KneeLimit(
            MAX_NUM_SEQS,
            _join(
                f"max_num_seqs ≈ {cap:.0f} (inferred: running stayed at {p.running:.0f} while "
                f"{p.waiting:.0f} waited at c={p.concurrency:g})",
                predicted,
            ),
        )
    if math.isfinite(kv_fill) and nxt is not None and kv_fill <= nxt.concurrency:
        return KneeLimit(KV, f"KV cache (predicted: fills at c≈{kv_fill:,.0f}, no KV metrics)")
    unknown = not any(math.isfinite(p.running) for p in seen)
    if unknown:
        return KneeLimit("", _join("limit unknown (no server metrics)", predicted))
    return KneeLimit(
        COMPUTE, _join("compute: throughput flat with no queue and KV not full", predicted)
    )


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if b else a


def max_num_seqs_seen(evidence: Sequence[ServerEvidence]) -> float:
    """The running count steps stopped at while requests waited (a report's ``max_num_seqs``,
    as the live view infers it from scrapes); nan when no step queued."""
    capped = [
        e.running_max
        for e in evidence
        if e.running_p50 > 0 and e.waiting_p50 > max(1.0, QUEUE_FRACTION * e.running_p50)
    ]
    return max(capped) if capped else math.nan
