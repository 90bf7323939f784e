"""Diagnosis lines: short, plain sentences that say why the numbers look the way they do.

Pure rules over what the Session already knows; each line has a stable ``key``. A
``CauseBook`` keeps one line per key for the whole session, with the steps it applied to
(``queueing · steps 9–11: 245 waiting…``), instead of a new event each time a figure in the
sentence changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infmon.model.compare.spec_econ import acceptance_text
from infmon.model.live.dashboard import Cause, ServerView
from infmon.model.server.gpu_state import GpuEvidence
from infmon.model.steps.span import CLOSED

KV_FULL_FRACTION = 0.95
LOW_ACCEPTANCE_RATE = 0.3
CLIENT_SHORTFALL_FRACTION = 0.8
"""Fewer than this share of the target streams in flight means the client cannot keep up."""
THROUGHPUT_DROP_FRACTION = 0.25
KV_OFFLOAD_FRACTION = 0.05
"""Loading KV back from the offload tier for this share of the time is worth a line."""
MIN_STEP_AGE_S = 10.0
"""Throughput comparisons within a step wait this long after the load changed."""


@dataclass(frozen=True, slots=True)
class DiagnosisInputs:
    server: ServerView
    client_output_tokens_per_s: float
    recent_client_series: tuple[float, ...]
    step_age_s: float
    load_mode: str
    load_level: float
    inflight_requests: int | None
    paused: bool
    gpu: GpuEvidence | None = None
    """The serving GPUs (DCGM or NVML), when there is GPU data."""
    ttft_p90_series: tuple[float, ...] = ()
    """Recent client TTFT p90, one value per second, oldest first."""
    recent_server_series: tuple[float, ...] = ()
    """Recent server generation tokens/s, one value per second, oldest first."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    key: str
    text: str


def _ok(x: float) -> bool:
    return not math.isnan(x)


def kv_full(i: DiagnosisInputs) -> Diagnosis | None:
    s = i.server
    full = _ok(s.kv_usage_fraction) and s.kv_usage_fraction >= KV_FULL_FRACTION
    if full and _ok(s.preemptions_per_s) and s.preemptions_per_s > 0:
        return Diagnosis("kv_full", f"KV cache full: {s.preemptions_per_s:.0f} preemptions/s")
    return None


def queueing(i: DiagnosisInputs) -> Diagnosis | None:
    s = i.server
    if not (_ok(s.waiting) and s.waiting > 0):
        return None
    if _ok(s.max_num_seqs) and _ok(s.running) and s.running >= s.max_num_seqs:
        why = f"running at max_num_seqs {s.max_num_seqs:.0f}"
    elif _ok(s.kv_usage_fraction) and s.kv_usage_fraction >= KV_FULL_FRACTION:
        why = "KV cache is the limit"
    elif _ok(s.running):
        why = f"behind {s.running:.0f} running"
    else:
        why = "the scheduler is saturated"
    return Diagnosis("queueing", f"queueing: {_waiting(s)}, {why}")


def _waiting(s: ServerView) -> str:
    """``240 waiting for capacity, 0 deferred`` when the server says why (vLLM ≥ 0.20)."""
    d = s.detail
    if d is None or not (_ok(d.waiting_capacity) and _ok(d.waiting_deferred)):
        return f"{s.waiting:.0f} waiting"
    return f"{d.waiting_capacity:.0f} waiting for capacity, {d.waiting_deferred:.0f} deferred"


def kv_offload(i: DiagnosisInputs) -> Diagnosis | None:
    """KV loaded back from the offload tier takes a share of the engine's time."""
    d = i.server.detail
    if d is None or not _ok(d.offload_load_fraction):
        return None
    if d.offload_load_fraction < KV_OFFLOAD_FRACTION:
        return None
    rate = d.offload_load_bytes_per_s
    moved = f"{rate / 1e9:.1f} GB/s loaded back" if _ok(rate) else "KV loaded back"
    return Diagnosis(
        "kv_offload",
        f"KV offload: {moved}, {d.offload_load_fraction:.0%} of the time spent loading",
    )


def asleep(i: DiagnosisInputs) -> Diagnosis | None:
    d = i.server.detail
    if d is None or d.sleep_state is None or d.sleep_state == "awake":
        return None
    return Diagnosis("asleep", f"the engine is asleep ({d.sleep_state}): a state, not an outage")


def client_bottleneck(i: DiagnosisInputs) -> Diagnosis | None:
    if i.paused or i.load_mode != CLOSED or i.inflight_requests is None or i.load_level < 2:
        return None
    if not i.server.up:
        return None
    if not (_ok(i.step_age_s) and i.step_age_s >= MIN_STEP_AGE_S):
        return None
    s = i.server
    server_idle = not _ok(s.waiting) or s.waiting == 0
    if i.inflight_requests < CLIENT_SHORTFALL_FRACTION * i.load_level and server_idle:
        return Diagnosis(
            "client",
            f"client is the bottleneck: {i.inflight_requests} of {i.load_level:g} streams in flight",
        )
    return None


def throughput_drop(i: DiagnosisInputs) -> float | None:
    """How far the client's throughput fell below this step's peak at constant load with no
    queue or KV change (at least ``THROUGHPUT_DROP_FRACTION``), else None."""
    return _drop(i, i.recent_client_series, i.client_output_tokens_per_s)


def server_drop(i: DiagnosisInputs) -> float | None:
    """``throughput_drop`` as the server's own generation counter saw it (None: it did not
    fall that far, or there is no counter). A GPU taken by someone else makes the server
    generate less; a client or host that falls behind does not."""
    return _drop(i, i.recent_server_series, i.server.generation_tokens_per_s)


def server_held(i: DiagnosisInputs) -> bool:
    """The server's generation rate is known over the step and did not fall."""
    known = [x for x in i.recent_server_series if _ok(x)]
    return len(known) >= 10 and _ok(i.server.generation_tokens_per_s) and server_drop(i) is None


def _drop(i: DiagnosisInputs, recent: tuple[float, ...], now: float) -> float | None:
    if i.paused or not (_ok(i.step_age_s) and i.step_age_s >= 2 * MIN_STEP_AGE_S):
        return None
    held = int(i.step_age_s - MIN_STEP_AGE_S)
    series = [x for x in recent[-held:] if _ok(x)]
    if len(series) < 10 or not _ok(now):
        return None
    peak = max(series)
    if peak <= 0:
        return None
    drop = 1 - now / peak
    s = i.server
    queue_quiet = not _ok(s.waiting) or s.waiting == 0
    kv_quiet = not _ok(s.kv_usage_fraction) or s.kv_usage_fraction < KV_FULL_FRACTION
    return drop if drop >= THROUGHPUT_DROP_FRACTION and queue_quiet and kv_quiet else None


def throughput_fell(i: DiagnosisInputs) -> Diagnosis | None:
    """Throughput fell at constant load with no queue or KV change: a noisy neighbour? (The GPU
    rules say which, when there is GPU data; this line is then left out.) When the server's
    own generation held, the drop is on the client's side, and the line says so."""
    drop = throughput_drop(i)
    if drop is None:
        return None
    if server_held(i):
        return Diagnosis(
            "fell",
            f"throughput fell {drop:.0%} at constant load while the server's generation held: "
            "the client side fell behind (its host's CPU, or the network)",
        )
    return Diagnosis("fell", f"throughput fell {drop:.0%} at constant load: contention?")


def low_acceptance(i: DiagnosisInputs) -> Diagnosis | None:
    spec = i.server.spec
    if spec is None or not _ok(spec.acceptance_rate) or spec.acceptance_rate >= LOW_ACCEPTANCE_RATE:
        return None
    k = len(spec.per_position_acceptance)
    return Diagnosis(
        "spec",
        f"low {acceptance_text(spec.mean_acceptance_length, k)}: drafts may cost more than "
        "they save",
    )


def server_down(i: DiagnosisInputs) -> Diagnosis | None:
    if i.server.up:
        return None
    return Diagnosis("down", f"server not answering: {i.server.error or 'no response'}")


RULES = (
    server_down,
    asleep,
    kv_full,
    queueing,
    kv_offload,
    client_bottleneck,
    throughput_fell,
    low_acceptance,
)


def diagnose(inputs: DiagnosisInputs) -> tuple[Diagnosis, ...]:
    """Every rule that fires, in a fixed order (most urgent first); the GPU rules
    (``infmon.model.live.gpu_rules``) after the server's, and a GPU explanation of a throughput
    drop replaces the generic "contention?" line."""
    from infmon.model.live.gpu_rules import GPU_RULES

    out = []
    for rule in (*RULES, *GPU_RULES):
        found = rule(inputs)
        if found is not None:
            out.append(found)
    if any(d.key == "gpu_contention" for d in out):
        out = [d for d in out if d.key != "fell"]
    return tuple(out)


class CauseBook:
    """One ``Cause`` per diagnosis key, in the order first seen; active ones first."""

    def __init__(self, max_causes: int = 32) -> None:
        self.max_causes = max_causes
        self._causes: dict[str, Cause] = {}

    def update(self, found: tuple[Diagnosis, ...], step: int | None, at_s: float) -> list[str]:
        """The diagnoses true now (during ``step``); returns the keys seen for the first time."""
        new = []
        now_keys = {d.key for d in found}
        for key, c in self._causes.items():
            if c.active and key not in now_keys:
                self._causes[key] = Cause(c.key, c.text, c.steps, False, c.since_s)
        for d in found:
            old = self._causes.get(d.key)
            if old is None:
                if len(self._causes) >= self.max_causes:
                    continue
                new.append(d.key)
                steps: tuple[int, ...] = ()
                since = at_s
            else:
                steps, since = old.steps, old.since_s
            if step is not None and step not in steps:
                steps = (*steps, step)
            self._causes[d.key] = Cause(d.key, d.text, steps, True, since)
        return new

    @property
    def causes(self) -> tuple[Cause, ...]:
        listed = list(self._causes.values())
        return tuple([c for c in listed if c.active] + [c for c in listed if not c.active])


def steps_label(steps: tuple[int, ...]) -> str:
    """``step 4``, ``steps 9–11``, ``steps 2, 5, 7–9``: runs of consecutive steps joined."""
    if not steps:
        return ""
    runs: list[list[int]] = []
    for s in sorted(set(steps)):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    parts = [f"{r[0]}" if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs]
    word = "step" if len(steps) == 1 else "steps"
    return f"{word} {', '.join(parts)}"
