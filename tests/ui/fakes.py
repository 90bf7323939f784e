"""Fakes for the UI tests: a driver and a source that record calls, and fixed session data."""

from __future__ import annotations

from typing import Any

from infmon.clock import FakeClock
from infmon.model.records import RequestRecord
from infmon.model.session import Session, SessionConfig
from infmon.model.stats import SLO


class FakeDriver:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.inflight = 0

    def set_concurrency(self, n: int) -> None:
        self.calls.append(("set_concurrency", n))
        self.inflight = n

    def set_rate(self, r: float) -> None:
        self.calls.append(("set_rate", r))

    def pause(self) -> None:
        self.calls.append(("pause", None))

    def resume(self) -> None:
        self.calls.append(("resume", None))


class FakeRecorder:
    def __init__(self, path: str = "/tmp/infmon-fake-session") -> None:
        self.actions: list[tuple[str, dict]] = []
        self.reports: list[tuple[str | None, bool]] = []
        self.path = path

    def record_action(self, kind: str, data: dict) -> None:
        self.actions.append((kind, data))

    def write_report(self, screenshot_svg: str | None, final: bool) -> str:
        self.reports.append((screenshot_svg, final))
        return self.path


def server_dict(running=32, waiting=0, kv=0.71, preempt=0.0, gen=1851.0, spec=None) -> dict:
    return {
        "running": running,
        "waiting": waiting,
        "max_num_seqs": 256,
        "kv_cache_usage": kv,
        "kv_capacity_tokens": 470_000,
        "kv_capacity_seqs": 1224,
        "tokens_per_seq": 384,
        "preemptions_per_s": preempt,
        "prefix_cache_hit_rate": 0.38,
        "queue_time": 0.003,
        "prefill_time": 0.041,
        "decode_time": 2.1,
        "generation_tokens_per_s": gen,
        "spec_decode": spec,
    }


SPEC = {
    "acceptance_rate": 0.12,
    "mean_acceptance_length": 1.1,
    "per_position_acceptance": [0.3, 0.1, 0.05, 0.02],
}


def record(i: int, sent: float, level: int, tokens: int = 64) -> RequestRecord:
    ttft = 0.08 + 0.004 * level + 0.01 * (i % 5)
    gap = 0.015 + 0.0005 * level
    chunks = tuple(sent + ttft + k * gap for k in range(tokens))
    return RequestRecord(
        i, sent, chunks, chunks[-1], prompt_tokens=128, output_tokens=tokens, concurrency=level
    )


def populated_session(
    clock: FakeClock, *, spec: bool = False, steps=(1, 2, 4, 8, 16), step_s: float = 20.0
) -> Session:
    """A session that ran a sweep: deterministic records, one server snapshot per second."""
    session = Session(
        SessionConfig(endpoint="http://127.0.0.1:8000", slo=SLO(ttft_s=0.5), step_warmup_s=2.0),
        start_s=clock.now(),
    )
    session.set_server_info(model="Qwen/Qwen2.5-7B-Instruct", backend="vLLM", version="0.32 V1")
    session.set_paused(False, clock.now())
    i = 0
    for level in steps:
        session.set_load("closed", level, clock.now())
        per_s = min(level, 8) * 1.0
        for _sec in range(int(step_s)):
            for k in range(int(per_s)):
                session.add_record(record(i, clock.now() + k / per_s, level))
                i += 1
            session.add_server(
                server_dict(
                    running=level,
                    waiting=max(0, level - 8),
                    kv=min(0.97, 0.06 * level),
                    gen=60.0 * min(level, 8),
                    spec=SPEC if spec else None,
                ),
                clock.now(),
            )
            clock.advance(1.0)
            session.snapshot(clock.now())
    session.add_mark(clock.now(), "switched to FP8")
    return session
