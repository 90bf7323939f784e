"""Fault injection for the simulator (``infmon sim --fault KIND[:VALUE][:RATE]``, repeatable).

Per-request faults are drawn from a seeded RNG, so a run with the same seed and the same request
order misbehaves the same way.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from dataclasses import dataclass

WANDER_TURN_S = 10.0
"""The ``wander`` fault's turn when none is given (or 0: no turn of no length)."""
# kind: (what VALUE means, default value, default rate); rate = share of requests / scrapes.
KINDS: dict[str, tuple[str, float | None, float | None]] = {
    "http500": ("", None, 0.1),
    "http503": ("", None, 0.1),
    "http429": ("Retry-After seconds", 1.0, 0.1),
    "reset": ("", None, 0.05),
    "stall": ("seconds without a byte", 5.0, 0.05),
    "malformed-sse": ("", None, 0.05),
    "metrics-slow": ("delay seconds", 3.0, 1.0),
    "metrics-truncated": ("", None, 0.5),
    "metrics-garbage": ("", None, 0.5),
    "restart": ("period seconds", 60.0, None),
    "exit": ("seconds after start", 30.0, None),
    "wander": ("seconds a turn", WANDER_TURN_S, None),
}
WANDER_SLOW = 2.0
"""The ``wander`` fault's slow turns: every step takes this many times as long. This project's
2-vCPU VM ran a fixed unit of work 1.7-1.9x slower in its slow turns (``bench/host_pace.py``)."""
HELP = """faults (repeatable --fault KIND[:VALUE][:RATE]; RATE = share of requests or scrapes):
  http500[:RATE], http503[:RATE]    answer that HTTP status in vLLM's error shape (default 0.1)
  http429[:SECS][:RATE]             429 with Retry-After: SECS (default 1 s, rate 0.1)
  reset[:RATE]                      reset the TCP connection mid-stream (default 0.05)
  stall[:SECS][:RATE]               a stream sends no bytes for SECS, then resumes (5 s, 0.05)
  malformed-sse[:RATE]              one invalid SSE event inside a stream (default 0.05)
  metrics-slow[:SECS][:RATE]        /metrics answers after SECS (3 s, every scrape)
  metrics-truncated[:RATE]          /metrics body cut in half, connection closed (0.5)
  metrics-garbage[:RATE]            /metrics answers 200 with text that is not Prometheus (0.5)
  restart[:SECS]                    every SECS (60): counters reset to zero, streams reset
  exit[:SECS]                       the process exits (status 70) SECS (30) into the load
  wander[:SECS]                     the server's pace by turns of SECS (10): full speed, then
                                    every step 2x as long, and again (a host whose cores run at
                                    two speeds: bench/host_pace.py)
  (timed faults count from the load's first request: one asking for more than one token,
  a client's one-token probes and tokenizer calls aside)"""


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    value: float | None
    rate: float | None


def parse_fault(text: str) -> Fault:
    """``KIND[:VALUE][:RATE]``; kinds without a VALUE take ``KIND[:RATE]``."""
    kind, *nums = text.strip().split(":")
    if kind not in KINDS:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
    meaning, value, rate = KINDS[kind]
    try:
        floats = [float(n) for n in nums]
    except ValueError:
        raise ValueError(f"fault {text!r}: VALUE and RATE must be numbers") from None
    if meaning and floats:
        value = floats.pop(0)
    if floats and rate is not None:
        rate = floats.pop(0)
    if floats:
        raise ValueError(f"fault {text!r}: too many fields")
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise ValueError(f"fault {text!r}: RATE must be within 0..1")
    return Fault(kind, value, rate)


class FaultPlan:
    def __init__(self, faults: tuple[Fault, ...], seed: int) -> None:
        self.by_kind = {f.kind: f for f in faults}
        self.rng = random.Random(seed * 7919 + 17)
        self.load_began = asyncio.Event()
        """Set by the first generation request of more than one token: timed faults count from
        there (a client's start-up, slow on a busy host, is not the load)."""

    def on_generation(self, max_tokens: int) -> None:
        if max_tokens > 1 and not self.load_began.is_set():
            self.load_began.set()

    def _hit(self, kind: str) -> Fault | None:
        f = self.by_kind.get(kind)
        if f is None:
            return None
        return f if f.rate is None or self.rng.random() < f.rate else None

    def reject(self, conn) -> bool:
        """Maybe answer a generation request with an HTTP error instead; True if it did."""
        for kind, status in (("http500", 500), ("http503", 503), ("http429", 429)):
            f = self._hit(kind)
            if f is not None:
                extra = {"retry-after": f"{f.value:g}"} if kind == "http429" else None
                body = {
                    "error": {
                        "message": f"simulated fault {kind}",
                        "type": "SimulatedFault",
                        "param": None,
                        "code": status,
                    }
                }
                conn.send_json(status, body, extra)
                return True
        return False

    def assign_stream_fault(self, stream) -> None:
        for kind in ("reset", "stall", "malformed-sse"):
            f = self._hit(kind)
            if f is not None:
                stream.fault = (kind, f.value or 0.0)
                return

    def apply_stream_fault(self, stream, start: int, n: int, done: str | None) -> bool:
        """Act on a stream's fault after its first chunk; True if the emission was consumed."""
        if start == 0 or stream.fault is None:
            return False
        kind, value = stream.fault
        stream.fault = None
        if kind == "reset":
            stream.conn.abort()
            return True
        if kind == "malformed-sse":
            stream.write(b'data: {"id": "broken", "choices": [\n\n')
        elif kind == "stall":
            stream.hold(value)
        return False

    def serve_metrics(self, conn, body: bytes, content_type: str) -> None:
        slow = self._hit("metrics-slow")
        if self._hit("metrics-garbage") is not None:
            body = b"<html><body>502 Bad Gateway</body></html>\n\x00\xff not prometheus {{{\n"
        elif self._hit("metrics-truncated") is not None:
            head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
            head += f"content-length: {len(body)}\r\n\r\n"
            send = lambda: (conn.write_raw(head.encode() + body[: len(body) // 2]), conn.close())  # noqa: E731
            self._later(slow, send)
            return
        self._later(slow, lambda: conn.send(200, body, content_type))

    @staticmethod
    async def _wander(server, turn_s: float) -> None:
        """The engine at full speed for ``turn_s``, then at ``1 / WANDER_SLOW`` for as long,
        and so on (``server.engine`` read at each turn)."""
        slow = False
        while True:
            await asyncio.sleep(turn_s)
            slow = not slow
            server.engine.pace = WANDER_SLOW if slow else 1.0

    @staticmethod
    def _later(slow: Fault | None, fn) -> None:
        if slow is None:
            fn()
        else:
            asyncio.get_running_loop().call_later(slow.value or 0.0, fn)

    async def run_timed(self, server) -> None:
        """Timed faults: periodic restarts, a process exit, a wandering pace."""
        restart, exit_ = self.by_kind.get("restart"), self.by_kind.get("exit")
        wander = self.by_kind.get("wander")
        if restart is None and exit_ is None and wander is None:
            return
        await self.load_began.wait()
        jobs = []
        if wander is not None:
            jobs.append(self._wander(server, wander.value or WANDER_TURN_S))  # no 0 s turns
        if restart is not None or exit_ is not None:
            jobs.append(self._restart_or_exit(server, restart, exit_))
        await asyncio.gather(*jobs)  # cancelled together when the server closes

    @staticmethod
    async def _restart_or_exit(server, restart: Fault | None, exit_: Fault | None) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        period = restart.value if restart is not None and restart.value else float("inf")
        next_restart = start + period
        exit_s = exit_.value if exit_ is not None else None
        exit_at = start + (exit_s if exit_s is not None else float("inf"))
        while True:
            await asyncio.sleep(max(0.0, min(next_restart, exit_at) - loop.time()))
            if loop.time() >= exit_at:
                print("infmon sim: fault exit: exiting now", flush=True)
                sys.stdout.flush()
                os._exit(70)
            server.simulate_restart()
            next_restart += period
