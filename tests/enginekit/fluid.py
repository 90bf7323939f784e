"""A closed loop against a batch-capped server, in virtual time: the records, load windows and
scrapes a real run would produce, one second at a time.

At ``c`` streams the server runs ``min(c, max_num_seqs)`` and queues the rest; TPOT grows a
little with the batch; a queued request waits its turn (TTFT grows). Records have the HTTP
client's shape (a chunk per token, usage at the end), windows are built with the engine's own
histogram code, scrapes come from a real vLLM page (``pages.ServerFeed``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.records.window import LoadWindow
from infmon.model.server.snapshot import ServerSnapshot
from tests.enginekit.pages import ServerFeed


@dataclass
class FluidServer:
    max_num_seqs: int = 256
    out_tokens: int = 128
    prompt_tokens: int = 128
    base_tpot_s: float = 0.018
    per_seq_tpot_s: float = 0.00003
    ttft_s: float = 0.03
    feed: ServerFeed = field(default_factory=ServerFeed)
    _rid: int = 0
    _carry: float = 0.0
    _open: list[RequestRecord] = field(default_factory=list)
    """Requests whose chunks may still fall in a coming window."""

    def tpot(self, running: int) -> float:
        return self.base_tpot_s + self.per_seq_tpot_s * running

    def second(
        self, t0: float, level: int, step_at: Callable[[float], int], warmup_until: float
    ) -> tuple[list[RequestRecord], LoadWindow, ServerSnapshot]:
        """What finished in ``[t0, t0 + 1)`` at ``level`` streams, that second's load window
        and the scrape at its end. ``step_at(t)``: the step a request sent at ``t`` belongs to."""
        t1 = t0 + 1.0
        running = min(level, self.max_num_seqs)
        tpot = self.tpot(running)
        service = self.ttft_s + (self.out_tokens - 1) * tpot
        rate = running / service
        queued = (level - running) / rate if level > running else 0.0
        self._carry += rate
        n, self._carry = int(self._carry), self._carry - int(self._carry)
        done = []
        for k in range(n):
            end = t0 + (k + 0.5) / n
            first = end - (self.out_tokens - 1) * tpot
            sent = first - self.ttft_s - queued
            times = tuple(first + j * tpot for j in range(self.out_tokens))
            step = step_at(sent)
            done.append(
                RequestRecord(
                    self._rid,
                    sent,
                    times,
                    end + 1e-4,
                    prompt_tokens=self.prompt_tokens,
                    output_tokens=self.out_tokens,
                    finish_reason="length",
                    step=step,
                    concurrency=level,
                    warmup=sent < warmup_until and step == step_at(t0),
                )
            )
            self._rid += 1
        self._open = [r for r in self._open if r.chunk_times_s[-1] >= t0] + done
        window = self._window(t0, t1, done, level, step_at(t1 - 1e-9))
        e2e = queued + service
        tags = [step_at(t1 - e2e * (j + 0.5) / 20) for j in range(20)]
        by_step = tuple(sorted((s, round(level * tags.count(s) / 20)) for s in set(tags)))
        # the meter counts every running stream's chunks as they arrive (one each TPOT), also of
        # requests that end in a later second
        window = replace(
            window, inflight_by_step=tuple((s, n) for s, n in by_step if n), tokens=running / tpot
        )
        snap = self.feed.scrape(
            t1,
            running=running,
            waiting=level - running,
            kv=min(0.95, 0.0009 * running),
            gen_per_s=window.tokens,
        )
        return done, window, snap

    def _window(
        self, t0: float, t1: float, done: list[RequestRecord], level: int, step: int
    ) -> LoadWindow:
        from tests.ui.fakes import window_of

        tokens_window = window_of(done, t0, t1, level, step, streams=self._open)
        return tokens_window

    def cancel_inflight(self, t: float, level: int, step: int) -> list[RequestRecord]:
        """The streams in flight when the operator quits: cancelled, with what they got."""
        running = min(level, self.max_num_seqs)
        tpot = self.tpot(running)
        out = []
        for k in range(level):
            sent = t - (k + 0.5) * 2.0 / level
            first = sent + self.ttft_s
            times = tuple(x for x in (first + j * tpot for j in range(self.out_tokens)) if x < t)
            out.append(
                RequestRecord(
                    self._rid,
                    sent,
                    times,
                    t,
                    step=step,
                    concurrency=level,
                    error_kind=ErrorKind.CANCELLED,
                    error_message="cancelled at shutdown",
                )
            )
            self._rid += 1
        return out
