"""Plain-language lines a report states: the verdict, then its own caveats."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from infmon.journal.events import StepPartial
from infmon.model.records.stats import PROMPT_MISMATCH_FRACTION
from infmon.model.steps.slo_verdict import slo_verdict
from infmon.report.doc import EventMark, KneeInfo, ServerPoint, SessionInfo, StepEntry, WorkloadInfo


def step_label(step: StepEntry) -> str:
    """A report step by its level: ``c=16``, ``rate=2/s``, else ``step 3``."""
    if step.get("concurrency") is not None:
        return f"c={step['concurrency']}"
    if step.get("rate") is not None:
        return f"rate={step['rate']}/s"
    return f"step {step.get('step')}"


def as_number(v: object) -> float | None:
    """A report field as a number (None when absent, not a number, or a bool)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def lines(knee: KneeInfo | None, slo_set: bool, steps: list[StepEntry]) -> list[str]:
    """Diagnosis lines grounded in the measured steps and server metrics."""
    out: list[str] = []
    if knee:
        out.append(f"Knee at c={knee.get('concurrency')}: {knee.get('reason', '')}".rstrip(": "))
    elif len(steps) >= 3:
        out.append("No knee within the steps run: throughput was still growing.")
    verdict = slo_verdict([s for s in steps if str(s.get("level", "c=")).startswith("c=")], slo_set)
    if slo_set:
        out.append(verdict.sentence())
    out += _step_causes(steps)
    return out


Render = Callable[[tuple[float, ...], str], str]
"""A cause's line from its worst figures and its text."""


class _Causes:
    """One line per cause, naming every step it applied to (not one line per step)."""

    def __init__(self) -> None:
        self.steps: dict[str, list[str]] = {}
        self.worst: dict[str, tuple[float, ...]] = {}
        self.text: dict[str, str] = {}

    def add(self, key: str, step: StepEntry, worst: tuple[float, ...], text: str) -> None:
        labels = self.steps.setdefault(key, [])
        if step_label(step) not in labels:
            labels.append(step_label(step))
        old = self.worst.get(key)
        self.worst[key] = worst if old is None else tuple(map(max, old, worst))
        if old is None or worst >= old:
            self.text[key] = text

    def lines(self, render: Mapping[str, Render]) -> list[str]:
        out = []
        for key, labels in self.steps.items():
            where = (
                ", ".join(labels)
                if len(labels) <= 4
                else (f"{labels[0]} … {labels[-1]} ({len(labels)} steps)")
            )
            kind = key.split(":", 1)[0]
            body = (
                render[kind](self.worst[key], self.text[key]) if kind in render else self.text[key]
            )
            out.append(f"{where}: {body}")
        return out


def _step_causes(steps: list[StepEntry]) -> list[str]:
    c = _Causes()
    for step in steps:
        srv = step.get("server") or {}
        for note in step.get("client_notes") or ():
            figures = tuple(float(x) for x in re.findall(r"\d+(?:\.\d+)?", note)[:1])
            c.add("client:" + re.sub(r"\d[\d.,]*", "#", note), step, figures, note)
        if (waiting := as_number(srv.get("waiting_max")) or 0) > 0:
            c.add("queued", step, (waiting,), "")
        if (pre := as_number(srv.get("preemptions_per_s_max")) or 0) > 0:
            c.add("preempt", step, (pre, as_number(srv.get("kv_usage_max")) or 0.0), "")
        prompt = step.get("prompt_lengths") or {}
        miss = as_number(prompt.get("mismatch"))
        if miss is not None and abs(miss) > PROMPT_MISMATCH_FRACTION:
            c.add(
                "prompt",
                step,
                (abs(miss),),
                f"the server counted {prompt['counted_mean']:.1f} prompt tokens per request, "
                f"{100 * miss:+.1f}% off the {prompt['requested_mean']:.1f} asked for: "
                "latencies compare with other runs only at equal prompt lengths.",
            )
        acc = as_number(srv.get("acceptance_rate_mean"))
        if acc is not None and acc < 0.3:
            c.add("spec", step, (-acc,), "")
        lost = (step.get("errors_by_kind") or {}).get("worker_lost", 0)
        if lost:  # a load worker died: its streams failed, the level went to the others
            c.add("lost", step, (float(lost),), "")
    return c.lines(
        {
            "client": lambda _w, note: (
                f"client self-check: {note} (the client may be the bottleneck)."
            ),
            "queued": lambda w, _t: f"requests queued on the server (waiting up to {w[0]:.0f}).",
            "preempt": lambda w, _t: (
                f"preemptions up to {w[0]:.1f}/s (KV usage up to {100 * w[1]:.0f}%)."
            ),
            "lost": lambda w, _t: (
                f"a load worker was lost: {w[0]:.0f} streams failed with it and the level was "
                "re-split over the others (see Faults and the caveats)."
            ),
            "spec": lambda w, _t: (
                f"speculative decoding acceptance {-w[0]:.2f} is low: the drafter costs more "
                "than it saves."
            ),
        }
    )


def caveats(
    s: SessionInfo,
    work: WorkloadInfo,
    server_timeline: Sequence[ServerPoint],
    events: Sequence[EventMark],
) -> list[str]:
    """What the reader should know before trusting the figures."""
    out = []
    if s.get("tokens_estimated"):
        out.append(
            f"{s['tokens_estimated']} requests had no usage from the server: their output "
            "token counts are estimated from chunks."
        )
    if work and not work.get("exact"):
        out.append(f"Prompt lengths: {work.get('sizing')}.")
    if work.get("lockstep"):
        out.append("--lockstep: every request asked for the same output length.")
    if s.get("warmup_excluded"):
        out.append(f"{s['warmup_excluded']} warm-up requests are excluded from step statistics.")
    if s.get("skipped_lines"):
        out.append(
            f"{s['skipped_lines']} unreadable journal lines were skipped (a torn last line "
            "after a kill, typically)."
        )
    if not s.get("ended_cleanly"):
        out.append(
            "The session did not end cleanly (killed or still running): the last step may "
            "be partial."
        )
    if not server_timeline:
        out.append("No server metrics were recorded: server-side figures are unknown.")
    for e in events:
        if (p := StepPartial.from_payload(e)) is not None:
            out.append(
                f"{p.label} is a partial step: stopped by {p.signal} after "
                f"{p.measured_s:.1f} s of its {p.planned_s:g} s; its "
                "figures are that part only."
            )
        if e.get("kind") == "worker_lost":
            out.append(
                f"Step {e.get('step')}: at {e.get('t_s', 0.0):.1f} s {e.get('text')} (the step's "
                "figures hold the surviving workers' requests and the lost ones as failures)."
            )
        if e.get("kind") == "worker_replaced":
            out.append(f"Step {e.get('step')}: at {e.get('t_s', 0.0):.1f} s {e.get('text')}.")
    out.append(
        "Over-time charts bin each request at its completion; latency over time is the "
        "mean per bin, step tables use exact percentiles."
    )
    return out
