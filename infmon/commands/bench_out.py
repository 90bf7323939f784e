"""What ``infmon bench`` prints and writes as it goes and at the end: the intro, the table's
rows and heartbeat (``bench_table``), the result document (``--json``), the scrape's health,
and the closing verdict (the knee, the SLO, failed requests and the exit status)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from infmon.clock import MonotonicClock
from infmon.commands import CliError
from infmon.commands.against import StepComparer, step_lines
from infmon.commands.bench_table import Progress, header, row
from infmon.commands.common import say
from infmon.commands.wiring import RunWiring
from infmon.config import Config
from infmon.engine.controller import Target
from infmon.engine.runner import EdgeRate, StepProgress, StepSpec
from infmon.journal import JournalWriter
from infmon.journal.safefile import write_text_atomic
from infmon.model.base.sanitize import redact_url
from infmon.model.records.anatomy import per_request_line
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.result import StepResult
from infmon.model.steps.slo_verdict import slo_verdict
from infmon.report.doc import BENCH_SCHEMA as SCHEMA


def print_intro(config: Config, target: Target, wide: bool, urls: tuple[str, ...] = ()) -> None:
    length = "pinned (ignore_eos)" if target.vllm_fields else "not pinned (server lacks ignore_eos)"
    if not config.ignore_eos:
        length = "not pinned (--no-ignore-eos)"
    # one fact a line: the intro fits 100 columns like the table (finding 8)
    where = f"{len(urls)} endpoints: {', '.join(urls)}" if len(urls) > 1 else config.url
    say(f"target: {where} · model {target.model}")
    say(f"endpoint: {config.endpoint} · output length {length}")
    say(per_request_line(target.per_request_metrics))
    if target.load_thread:
        say(f"load thread: {target.load_thread}")
    if config.step_requests is not None:
        say(
            f"each step sends exactly {config.step_requests} measured requests "
            "(--step-requests; not cut short by --step-duration)"
        )
    say(header(wide))


class BenchProgress(Progress):
    def __init__(self, wide: bool, journal: JournalWriter) -> None:
        super().__init__()
        self.wide, self.journal = wide, journal
        self.comparer: StepComparer | None = None
        self.clock: MonotonicClock | None = None
        self.last: StepProgress | None = None
        """The last heartbeat: the step a stop cuts short (``bench_partial``)."""

    def tick(self, p: StepProgress) -> None:
        self.last = p
        note = self.journal.status().line()  # a failing disk is said while the run goes on
        super().tick(replace(p, backoff=" · ".join(x for x in (p.backoff, note) if x) or None))

    def retake(self, text: str) -> None:
        self.clear()
        say_wrapped(text, 6)

    def step(self, index: int, spec: StepSpec, result: StepResult, server: EdgeRate) -> None:
        self.clear()
        self.last = None  # its row is printed
        s = result.stats
        say(row(index, spec, s, server, self.wide))
        for note in s.client_notes:  # wrapped: the table's 100 columns hold every line
            say_wrapped(f"client self-check: {note} (the client may be the bottleneck)", 6)
        if s.tokens_estimated:
            say("      note: output tokens counted from chunks (no usable usage from the server)")
        if self.comparer is not None and self.clock is not None:
            c = self.comparer.at_step(result.span.index, self.clock.now())
            for line in step_lines(c) if c is not None else ():
                say(line)


def result_doc(
    config: Config,
    target: Target,
    results: list[tuple[StepResult, EdgeRate]],
    errors: Counter[str],
    ledger: StepLedger,
) -> dict[str, Any]:
    steps = []
    for r, server in results:
        d: dict[str, object] = dict(r.to_dict())
        d["server_generation_tok_s"] = server.tokens_per_s
        d["server_window_s"] = server.window_s
        steps.append(d)
    knee = ledger.knee(0.0)
    return {
        "schema": SCHEMA,
        "target": {"url": config.url, "model": target.model, "endpoint": config.endpoint},
        "steps": steps,
        "knee": knee.to_dict() if knee else None,
        "slo_max_concurrency": ledger.slo_limit(0.0),
        "slo": config.slo.to_dict(),
        "config": config.to_public_dict(),
        "top_errors": [{"error": e, "count": n} for e, n in errors.most_common(5)],
    }


def health_summary(wiring: RunWiring, origin_s: float) -> dict[str, Any]:
    h = wiring.health

    def rel(x: float | None) -> float | None:
        return None if x is None else round(x - origin_s, 3)

    return {
        "scrapes": h.scrapes,
        "failed_by_kind": dict(h.failed_by_kind),
        "restarts": h.restarts,
        "no_metrics": h.state == "no_metrics",
        "outages": [
            {
                "start_s": rel(o.start_s),
                "end_s": rel(o.end_s),
                "duration_s": o.duration_s,
                "kind": o.error_kind,
            }
            for o in h.all_outages()
        ],
    }


def describe_health(wiring: RunWiring) -> str:
    h = wiring.health
    if h.state == "no_metrics":
        return "server metrics: none (the server publishes no /metrics)"
    failed = ", ".join(f"{k} {n}" for k, n in h.failed_by_kind.most_common()) or "none"
    text = f"server metrics: {h.scrapes} scrapes, failed: {failed}, restarts seen: {h.restarts}"
    for o in h.all_outages():
        dur = "until the end" if o.duration_s is None else f"for {o.duration_s:.1f} s"
        what = "unreachable" if o.error_kind in ("connect", "timeout", "http") else "unusable"
        text += f"\n  server metrics {what} {dur} ({o.error_kind})"
    return text


def write_json(path: Path, result: dict[str, Any]) -> None:
    try:
        write_text_atomic(path, redact_url(json.dumps(result, indent=2, allow_nan=False)) + "\n")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    say(f"wrote {path}")


def say_wrapped(text: str, indent: int = 0) -> None:
    """One verdict or note, wrapped at the table's 100 columns (continuations indented)."""
    for line in textwrap.wrap(
        text, 100, initial_indent=" " * indent, subsequent_indent=" " * (indent + 2),
        break_on_hyphens=False,
    ):  # fmt: skip
        say(line)


def no_knee(closed: Sequence[Mapping[str, object]]) -> str:
    """Why no knee was named: the throughput still rose at the top level, or no step showed
    one (said, never left out: a sweep's reader looks for the knee line)."""
    a, b = closed[-2], closed[-1]
    x, y = a.get("output_throughput_tok_s"), b.get("output_throughput_tok_s")
    top = f"c={b['concurrency']}"
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 and y >= 1.1 * x:
        return (
            f"knee: not reached up to {top}: output tok/s still rising ({x:,.0f} → {y:,.0f} "
            f"from c={a['concurrency']}, ×{y / x:.1f}); measure higher levels to find it"
        )
    return f"knee: none named up to {top} (no flattening or server limit in these steps)"


def verdict(result: dict[str, Any]) -> int:
    """0 when every request succeeded; 1 when some failed; a clear error when none succeeded."""
    steps = result["steps"]
    knee = result["knee"]
    closed = [s for s in steps if s.get("concurrency") is not None]
    if knee:
        tail = "" if knee.get("confirmed", True) else " — not confirmed: no higher level measured"
        say_wrapped(f"knee: c={knee['concurrency']} ({knee['reason']}){tail}")
    elif len(closed) >= 2:
        say_wrapped(no_knee(closed))
    if any(v is not None for v in (result.get("slo") or {}).values()) and closed:
        say_wrapped(slo_verdict(closed, slo_set=True).sentence())
    completed = sum(s["completed"] for s in steps)
    failed = sum(s["failed"] for s in steps)
    if completed == 0:
        if failed == 0:
            longest = max((s.get("duration_s") or 0.0 for s in steps), default=0.0)
            if cancelled := sum(s.get("cancelled") or 0 for s in steps):
                raise CliError(f"no request succeeded: all {cancelled} measured were cancelled")
            why = (
                " (every stream still held a warm-up request)"
                if steps[0].get("concurrency")
                else ""
            )
            raise CliError(
                f"no measured request: none was sent in the {longest:.1f} s measured{why}; "
                "lengthen --step-duration to a few request durations, or shorten --output-tokens"
            )
        top = result["top_errors"][0]["error"] if result["top_errors"] else "see the session"
        raise CliError(f"no request succeeded ({failed} failed; most common: {top})")
    if failed:
        top = result["top_errors"][0]["error"] if result["top_errors"] else "see the session"
        say(
            f"infmon: {failed} of {completed + failed} requests failed (most common: {top})",
            err=True,
        )
        return 1
    return 0
