"""The simulator's HTTP server: vLLM's OpenAI-compatible API over the simulated engine.

One asyncio loop. Requests are parsed and queued into the engine; one engine task runs steps,
sleeps each step's simulated duration, then writes every stream's new tokens and updates the
Prometheus counters (so counters never run ahead of what clients received).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

from infmon import __version__
from infmon.sim import tokenizer
from infmon.sim.dcgm import CONTENT_TYPE as DCGM_CONTENT_TYPE
from infmon.sim.dcgm import DcgmSeries, Holder, Neighbour
from infmon.sim.engine import Engine, Sequence, StepOutput
from infmon.sim.faults import FaultPlan
from infmon.sim.http import Connection, Request
from infmon.sim.metrics import CONTENT_TYPE, MetricsLevel, SimMetrics
from infmon.sim.pd import Handoff, prefill_request
from infmon.sim.requests import ApiError, parse_detokenize, parse_request, parse_tokenize
from infmon.sim.roofline import EngineConfig
from infmon.sim.streams import SSE_HEADERS, Stream
from infmon.sim.text import TextModel, load_probes, token_ids
from infmon.sim.trace import TimingTrace

VLLM_API = "0.32.0"
"""The vLLM whose API and metric names the simulator serves (its ``/version`` and banner)."""


def served_version() -> str:
    """What ``/version`` answers, and what the banner names."""
    return f"{VLLM_API}+infmon.sim.{__version__}"


DELIVERY_SLICE = 128  # streams written per loop turn: bounds the loop lag one step causes
CATCH_UP_S = 0.25
"""How far the engine's clock may run ahead of a late wake: a step that ends while the
simulator's process waited for a CPU starts the next at its own end (GPU time goes on while
the host is busy), so a shared or loaded host does not slow the simulated GPU; beyond this
the debt is given up (counted in /infmon/stats as ``fell_behind_s``), never a burst longer."""


@dataclass(frozen=True, slots=True)
class ServerOptions:
    metrics_schema: str = "v1"
    seed: int = 0
    quality_error_rate: float = 0.0
    faults: tuple = ()
    trace_path: str | None = None
    probes: dict = field(default_factory=load_probes)
    pod: str = "infmon-sim-0"
    """The pod the simulated DCGM exporter says holds the GPU (``--pod``)."""
    namespace: str = "default"
    hostname: str = "infmon-sim"
    dcgm_port: int | None = None
    """Also serve the DCGM page as ``/metrics`` on this port (an exporter of its own)."""
    per_request_metrics: bool = False
    """vLLM's ``--enable-per-request-metrics``: the server's timings on each final usage chunk."""
    spec_decode_metrics: str = "none"
    """vLLM's ``--per-request-spec-decode-metrics``: ``none``, ``summary`` or ``detailed``."""


class SimServer:
    def __init__(self, cfg: EngineConfig, opts: ServerOptions | None = None) -> None:
        self.cfg = cfg
        self.opts = opts or ServerOptions(seed=cfg.seed)
        self.engine = Engine(cfg)
        self.metrics = SimMetrics(cfg, self.engine.budget, self.opts.metrics_schema)
        self.text = TextModel(self.opts.probes, self.opts.quality_error_rate, self.opts.seed)
        self.faults = FaultPlan(self.opts.faults, self.opts.seed)
        self.trace = TimingTrace(self.opts.trace_path) if self.opts.trace_path else None
        self.dcgm = DcgmSeries(
            cfg,
            self.engine.budget,
            server=Holder(self.opts.pod, self.opts.namespace, "vllm"),
            hostname=self.opts.hostname,
            neighbour=Neighbour.for_contention(cfg.contention),
        )
        self.dcgm_port: int | None = None
        self._dcgm_server: asyncio.base_events.Server | None = None
        self.created = int(time.time())
        self._counter = itertools.count()
        self._conns: set[Connection] = set()
        self._wake = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._task: asyncio.Task | None = None
        self._fault_task: asyncio.Task | None = None
        self.routes = {
            ("GET", "/v1/models"): self._models,
            ("GET", "/health"): self._health,
            ("GET", "/version"): self._version,
            ("GET", "/metrics"): self._metrics,
            ("GET", "/metrics/"): self._metrics,
            ("HEAD", "/metrics"): self._metrics_head,
            ("HEAD", "/metrics/"): self._metrics_head,
            ("POST", "/tokenize"): self._tokenize,
            ("POST", "/detokenize"): self._detokenize,
            ("POST", "/v1/completions"): self._generate,
            ("POST", "/v1/chat/completions"): self._generate,
            ("GET", "/sim/stats"): self._stats,
            ("GET", "/gpu-metrics"): self._gpu_metrics,
        }
        self._lags_s: deque[float] = deque(maxlen=100_000)
        self._fell_behind_s = 0.0
        self._warn_at_s = 1.0
        self._deliver_s: deque[float] = deque(maxlen=100_000)
        self._deliver_cpu_s: deque[float] = deque(maxlen=100_000)
        self._lag_task: asyncio.Task | None = None
        self.base_url = ""
        self.prefill_pod: SimServer | None = None
        """``--pd``: the pod that computes prompts for this (decode) pod."""

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._connection, host, port, backlog=4096)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        self._task = asyncio.create_task(self._engine_loop())
        self._fault_task = asyncio.create_task(self.faults.run_timed(self))
        self._lag_task = asyncio.create_task(self._watch_lag())
        if self.opts.dcgm_port is not None:
            self._dcgm_server = await loop.create_server(
                lambda: Connection(self._dcgm_only, lambda c: None), host, self.opts.dcgm_port
            )
            self.dcgm_port = self._dcgm_server.sockets[0].getsockname()[1]
        return port

    def _dcgm_only(self, req: Request, conn: Connection) -> None:
        """The ``--dcgm-port`` listener: a DCGM exporter has ``/metrics`` and nothing else."""
        if req.method in ("GET", "HEAD") and req.path in ("/metrics", "/metrics/"):
            self._gpu_metrics(req, conn)
        else:
            conn.send_json(404, {"detail": "Not Found"})

    def _connection(self) -> Connection:
        conn = Connection(self.handle, self._lost)
        self._conns.add(conn)
        return conn

    def simulate_restart(self) -> None:
        """The restart fault: in-flight streams are reset and every counter starts from zero."""
        for conn in list(self._conns):
            if conn.streaming is not None:
                conn.abort()
        self.metrics.reset()

    async def close(self) -> None:
        for task in (self._task, self._fault_task, self._lag_task):
            if task is not None:
                task.cancel()
        for srv in (self._server, self._dcgm_server):
            if srv is not None:
                srv.close()
        if self.trace is not None:
            self.trace.close()

    # -- routing ----------------------------------------------------------------------------
    def handle(self, req: Request, conn: Connection) -> None:
        t0 = time.perf_counter()
        size = req.headers.get("content-length", "0")

        def record(status: int, resp_bytes: int) -> None:
            self.metrics.observe_http(
                req.path,
                req.method,
                status,
                int(size) if size.isdigit() else 0,
                resp_bytes,
                time.perf_counter() - t0,
            )

        key = (req.method, req.path)
        if req.method == "HEAD" and key not in self.routes:
            key = ("GET", req.path)  # Starlette serves HEAD on every GET route
        conn.on_response = record if key in self.routes else None
        route = self.routes.get(key)
        if route is None:
            known = any(path == req.path for _, path in self.routes)
            status = 405 if known else 404
            msg = "Method Not Allowed" if known else "Not Found"
            conn.send_json(status, {"detail": msg})
            return
        try:
            route(req, conn)
        except ApiError as exc:
            conn.send_json(exc.status, exc.body())
        except Exception as exc:  # a simulator bug must not kill the connection silently
            conn.send_json(500, ApiError(500, f"simulator error: {exc!r}").body())

    def _models(self, req: Request, conn: Connection) -> None:
        name = self.cfg.served_model_name
        perm = {
            "id": f"modelperm-{uuid.uuid4().hex}",
            "object": "model_permission",
            "created": self.created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        model = {
            "id": name,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": self.cfg.model.name,
            "parent": None,
            "max_model_len": self.cfg.max_model_len,
            "permission": [perm],
        }
        conn.send_json(200, {"object": "list", "data": [model]})

    def _health(self, req: Request, conn: Connection) -> None:
        conn.send(200, b"", "application/json")

    def _version(self, req: Request, conn: Connection) -> None:
        conn.send_json(200, {"version": served_version()})

    def _metrics(self, req: Request, conn: Connection) -> None:
        self.faults.serve_metrics(conn, self.metrics.render(), CONTENT_TYPE)

    def _gpu_metrics(self, req: Request, conn: Connection) -> None:
        """The virtual GPU as a DCGM exporter shows it (``infmon.sim.dcgm``)."""
        conn.send(200, self.dcgm.render(asyncio.get_running_loop().time()), DCGM_CONTENT_TYPE)

    @property
    def fell_behind_s(self) -> float:
        """Engine time given up because the process woke more than ``CATCH_UP_S`` late."""
        return self._fell_behind_s

    def _metrics_head(self, req: Request, conn: Connection) -> None:
        """200 and no body, as vLLM answers (a 405 breaks aiohttp's probes)."""
        conn.send(200, b"", CONTENT_TYPE)

    def _stats(self, req: Request, conn: Connection) -> None:
        """The simulator's own health (not a vLLM endpoint): event-loop lag since the last call."""

        def summary(values: deque[float]) -> dict:
            v = sorted(values)
            values.clear()

            def pct(p: float) -> float | None:
                return v[min(len(v) - 1, int(p * len(v)))] * 1e3 if v else None

            return {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0), "samples": len(v)}

        conn.send_json(
            200,
            {
                "loop_lag_ms": summary(self._lags_s),
                "step_delivery_ms": summary(self._deliver_s),
                "step_delivery_cpu_ms": summary(self._deliver_cpu_s),
                "fell_behind_s": round(self._fell_behind_s, 3),
                "running": len(self.engine.running),
                "waiting": len(self.engine.waiting),
                "connections": len(self._conns),
                "pd_role": self.cfg.pd_role or None,
                "prefill_pod": self.prefill_pod.base_url if self.prefill_pod else None,
            },
        )

    async def _watch_lag(self, period_s: float = 0.01) -> None:
        """Loop lag: how late a 10 ms sleep wakes (perf_counter; uvloop's clock is in ms)."""
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(period_s)
            self._lags_s.append(max(0.0, time.perf_counter() - t0 - period_s))

    def _tokenize(self, req: Request, conn: Connection) -> None:
        prompt = parse_tokenize(req, self.cfg)
        ids = prompt if isinstance(prompt, list) else token_ids(prompt)
        conn.send_json(
            200,
            {
                "count": len(ids),
                "max_model_len": self.cfg.max_model_len,
                "tokens": ids,
                "token_strs": None,
            },
        )

    def _detokenize(self, req: Request, conn: Connection) -> None:
        ids = parse_detokenize(req, self.cfg)
        try:
            text = tokenizer.decode(ids)
        except ValueError as exc:
            raise ApiError(400, str(exc), "tokens") from None
        conn.send_json(200, {"prompt": text})

    # -- generation -------------------------------------------------------------------------
    def _generate(self, req: Request, conn: Connection) -> None:
        chat = req.path.endswith("/chat/completions")
        spec, prompt = parse_request(req, chat, self.cfg, self.text)
        self.faults.on_generation(spec.max_tokens)
        if self.faults.reject(conn):
            return
        prefix = "chatcmpl-" if chat else "cmpl-"
        req_id = f"{prefix}{next(self._counter):08x}{uuid.uuid4().hex[:16]}"
        stream = Stream(conn, spec, req_id, self.cfg.served_model_name, int(time.time()))
        if self.trace is not None:
            stream.trace = []
        now = asyncio.get_running_loop().time()
        seq = Sequence(
            req_id,
            spec.prompt_tokens,
            spec.max_tokens,
            spec.stop_at,
            now,
            handle=stream,
            truth=spec.token_id,
        )
        stream.seq = seq
        stream.metrics_level = self._metrics_level(spec)
        conn.streaming = stream
        if spec.stream:
            conn.start_stream(
                200, "text/event-stream; charset=utf-8", {**SSE_HEADERS, **stream.headers()}
            )
            self.faults.assign_stream_fault(stream)
        ids = prompt if isinstance(prompt, list) else token_ids(prompt)
        self.metrics.on_admitted(spec.max_tokens, True)
        delay = self.cfg.engine.request_overhead_s
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._enqueue, seq, ids)
        else:
            self._enqueue(seq, ids)

    def _metrics_level(self, spec: object) -> MetricsLevel | None:
        """What the final usage chunk carries (vLLM: n == 1 requests only; the simulator
        serves n == 1 only)."""
        spec_level = self.opts.spec_decode_metrics if self.cfg.spec_enabled else "none"
        if not self.opts.per_request_metrics and spec_level == "none":
            return None
        return MetricsLevel(self.opts.per_request_metrics, spec_level, self.engine.k)

    def _enqueue(self, seq: Sequence, ids: list[int]) -> None:
        """The request reaches the scheduler (after the API server's own work); with a
        prefill pod, that pod's scheduler first (``infmon.sim.pd``)."""
        if self.prefill_pod is not None:
            self.prefill_pod.prefill_for(self, seq, ids)
        else:
            self.enqueue_local(seq, ids)

    def enqueue_local(self, seq: Sequence, ids: list[int]) -> None:
        if seq.finish_reason is not None:
            return  # the client went away first
        now = asyncio.get_running_loop().time()
        if self.prefill_pod is not None:
            seq.arrival_s = now  # this pod's vLLM sees the request once prefilled
        seq.queued_s = now
        self.engine.add(seq, ids)
        self._wake.set()

    def prefill_for(self, decode: SimServer, seq: Sequence, ids: list[int]) -> None:
        """A decode pod's request: compute its prompt here (max_tokens=1), then hand it over."""
        if seq.finish_reason is not None:
            return
        self.metrics.on_admitted(1, True)
        self.engine.add(prefill_request(seq, decode, ids, asyncio.get_running_loop().time()), ids)
        self._wake.set()

    def _lost(self, conn: Connection) -> None:
        self._conns.discard(conn)
        stream = conn.streaming
        if isinstance(stream, Stream) and stream.seq is not None:
            now = asyncio.get_running_loop().time()
            if self.engine.abort(stream.seq, now):
                self.metrics.on_finished(stream.seq)
                self._record_trace(stream, "abort")

    # -- the engine loop --------------------------------------------------------------------
    async def _engine_loop(self) -> None:
        loop = asyncio.get_running_loop()
        t = loop.time()
        while True:
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                t = loop.time()
            out = self.engine.step(t)
            delay = out.end_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif out.end_s == out.start_s:
                await asyncio.sleep(0.001)  # nothing schedulable: do not spin
            await self._deliver(out)
            now = loop.time()
            if out.end_s == out.start_s:  # an empty step: the engine's clock meets the wall
                t = now
            elif now - out.end_s > CATCH_UP_S:  # too far behind: give the debt up, say it
                self._fell_behind_s += now - out.end_s - CATCH_UP_S
                t = now - CATCH_UP_S
                if self._fell_behind_s >= self._warn_at_s:
                    self._warn_at_s *= 2
                    print(
                        f"infmon sim: {self._fell_behind_s:.1f} s of GPU time given up: this "
                        "host's CPU did not keep up, the simulated server runs slower than the "
                        "GPU it models",
                        file=sys.stderr,
                        flush=True,
                    )
            else:
                t = out.end_s

    async def _deliver(self, out: StepOutput) -> None:
        """Write the step's tokens in slices, yielding to the loop between slices."""
        emitted = out.emitted
        for i in range(0, len(emitted), DELIVERY_SLICE):
            if i:
                await asyncio.sleep(0)
            w0, c0 = time.perf_counter(), time.thread_time()
            self._emit(out, emitted[i : i + DELIVERY_SLICE])
            self._deliver_s.append(time.perf_counter() - w0)
            self._deliver_cpu_s.append(time.thread_time() - c0)
        self.metrics.on_step(out, self.engine.pool.drain_events())
        self.dcgm.on_step(out)
        for seq in out.finished:
            self.metrics.on_finished(seq)
            if isinstance(seq.handle, Stream):
                self._record_trace(seq.handle, seq.finish_reason)
            elif isinstance(seq.handle, Handoff):
                seq.handle.prefilled()
        if not self.engine.has_work:
            self.metrics.set_state(0, 0, self.engine.pool.usage)

    def _emit(self, out: StepOutput, emitted: list) -> None:
        end_s = out.end_s
        metrics = self.metrics
        for seq, n in emitted:
            stream = seq.handle
            if not isinstance(stream, Stream):
                continue  # a prefill pod's request: nothing to stream (infmon.sim.pd)
            start = seq.output_len - n
            if start == 0:
                metrics.on_first_token(seq)
            elif stream.last_emit_s == stream.last_emit_s:  # not nan
                metrics.observe_itl(end_s - stream.last_emit_s)
            stream.last_emit_s = end_s
            done = seq.finish_reason
            if stream.fault is not None and self.faults.apply_stream_fault(stream, start, n, done):
                continue
            stream.emit(start, n, done)

    def _record_trace(self, stream: Stream, outcome: str | None) -> None:
        if self.trace is not None and stream.trace is not None:
            self.trace.write(stream, outcome)
