"""The clients ``bench/real_truth.py`` and the unpinned real-server test run, what each measured,
and the server's window.

Each client runs the same load once and returns its ``Figures``: per request mean TTFT and TPOT
(vLLM's definitions), output tokens and tok/s. ``Window`` is the server's own view over the run
(deltas of its Prometheus page): mean TTFT, mean TPOT, generated tokens, finished requests.
infmon sends one probe before its load (one token, ``max_tokens`` 1): the server counts it
(one more request and token; its TPOT observation is 0, so the server's mean TPOT leaves it
out exactly; its TTFT, a lone request's, moves the server's mean by (probe − mean) / requests,
under 0.1 ms here). ``vllm bench serve`` runs with ``--ready-check-timeout-sec 0``: no test
request, so the server sees exactly its requests.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from infmon.journal.reader import SessionReader
from tests.real.harness import REPO, Tmux, rs, sample_sum

CLIENTS = {
    "default": "`infmon bench` (default)",
    "in-process": "`infmon bench --in-process`",
    "high": "`infmon bench --load-priority high`",
    "normal": "`infmon bench --load-priority normal`",
    "vllm": "`vllm bench serve`",
    "monitor": "`infmon` monitor (default)",
    "before": "`infmon bench` of the --before checkout",
}
INFMON_PROBES = 1
"""Requests infmon sends before its load (the capability probe), one token each."""
SETTLE_S = 10.0
TTFT_SLACK_MS = 1.0
TPOT_BAND = (0.97, 1.03)


def tpot_true(ours: float, ref: float) -> bool:
    """In the band, or at least as close to the server's figure as vLLM's own client (the
    server's TPOT is itself late when its API process starves on a loaded host)."""
    return TPOT_BAND[0] <= ours <= TPOT_BAND[1] or abs(ours - 1) <= abs(ref - 1) + 0.005


@dataclass(frozen=True)
class RunSpec:
    url: str
    concurrency: int
    requests: int
    prompts: Path
    tmp: Path
    threads: bool = False
    before: Path | None = None
    """Another checkout of infmon (``--before``): its default path runs as client "before"."""


@dataclass(frozen=True)
class Window:
    """The server's own figures over one run (deltas between two /metrics pages)."""

    ttft_ms: float
    tpot_ms: float
    tokens: float
    requests: float

    @staticmethod
    def between(before: str, after: str, probes: int = 0) -> Window:
        def d(name: str) -> float:
            return sample_sum(after, name) - sample_sum(before, name)

        n_ttft = d("vllm:time_to_first_token_seconds_count")
        n_tpot = d("vllm:request_time_per_output_token_seconds_count") - probes
        return Window(
            1e3 * d("vllm:time_to_first_token_seconds_sum") / n_ttft,
            1e3 * d("vllm:request_time_per_output_token_seconds_sum") / n_tpot,
            d("vllm:generation_tokens_total"),
            d("vllm:request_success_total"),
        )


@dataclass
class Figures:
    client: str
    requests: int
    ttft_ms: float
    tpot_ms: float
    tokens: int
    tok_s: float
    probes: int = 0
    threads: list[str] = field(default_factory=list)
    window: Window | None = None

    @property
    def added_ttft_ms(self) -> float:
        assert self.window is not None
        return self.ttft_ms - self.window.ttft_ms

    @property
    def tpot_ratio(self) -> float:
        assert self.window is not None
        return self.tpot_ms / self.window.tpot_ms

    @property
    def tokens_equal(self) -> bool:
        w = self.window
        return w is not None and self.tokens + self.probes == w.tokens

    def line(self) -> str:
        w = self.window
        assert w is not None
        return (
            f"{self.client:10s} {self.requests} req  TTFT {self.ttft_ms:7.2f} ms (server "
            f"{w.ttft_ms:7.2f}, added {self.added_ttft_ms:+7.2f})  TPOT {self.tpot_ms:6.3f} ms "
            f"(server {w.tpot_ms:6.3f}, ratio {self.tpot_ratio:.3f})  {self.tok_s:7.1f} tok/s  "
            f"tokens {self.tokens}+{self.probes} vs server {w.tokens:.0f}"
        )


def server_page(url: str, after: str | None = None, fig: Figures | None = None) -> str:
    """The server's /metrics; after a run, once it counts every request the client made."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            page = str(resp.read().decode())
        if after is None or fig is None or time.monotonic() > deadline:
            return page
        done = sample_sum(page, "vllm:request_success_total") - sample_sum(
            after, "vllm:request_success_total"
        )
        if done >= fig.requests + fig.probes:
            return page
        time.sleep(0.1)


def measured(client: str, spec: RunSpec, out: Path) -> Figures:
    """One run of ``client`` with the server's window around it."""
    before = server_page(spec.url)
    fig = run_client(client, spec, out)
    fig.window = Window.between(before, server_page(spec.url, before, fig), fig.probes)
    return fig


def order(clients: list[str], rounds: int) -> list[str]:
    """A-B-B-A: forwards, then backwards, ``rounds`` times (a drift favours none)."""
    out: list[str] = []
    for r in range(rounds):
        out += clients if r % 2 == 0 else clients[::-1]
    return out


def run_client(client: str, spec: RunSpec, out: Path) -> Figures:
    out.mkdir(parents=True, exist_ok=True)
    if client == "vllm":
        return _vllm(spec, out)
    if client == "monitor":
        return _monitor(spec, out)
    if client == "before":
        assert spec.before is not None
        return _bench(spec, out, in_process=False, repo=spec.before)
    if client in ("high", "normal"):
        return _bench(spec, out, in_process=False, extra=("--load-priority", client))
    return _bench(spec, out, in_process=client == "in-process")


def _load_args(spec: RunSpec) -> list[str]:
    return ["--dataset", str(spec.prompts), "--output-tokens", "32", "--endpoint", "completions"]


def _bench(
    spec: RunSpec, out: Path, in_process: bool, repo: Path = REPO, extra: tuple[str, ...] = ()
) -> Figures:
    session, result = out / "session", out / "bench.json"
    cmd = [sys.executable, "-m", "infmon", "bench", spec.url, *_load_args(spec)]
    cmd += ["--concurrency", str(spec.concurrency), "--step-requests", str(spec.requests)]
    cmd += ["--step-duration", "600s", "--warmup", "0s", "--session-dir", str(session)]
    cmd += ["--json", str(result), *(["--in-process"] if in_process else []), *extra]
    env = {**os.environ, "PYTHONPATH": str(repo), "NO_COLOR": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler = ThreadSampler(proc.pid) if spec.threads else None
    output = proc.communicate(timeout=900)[0].decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"infmon bench failed:\n{output[-3000:]}")
    step = json.loads(result.read_text())["steps"][0]
    name = (
        "before"
        if repo != REPO
        else "in-process"
        if in_process
        else extra[-1]
        if extra
        else "default"
    )
    fig = _from_session(name, session, step["output_throughput_tok_s"])
    fig.threads = sampler.lines() if sampler else []
    fig.threads += [ln for ln in output.splitlines() if "self-check" in ln or "load:" in ln]
    return fig


def _from_session(client: str, session: Path, tok_s: float | None = None) -> Figures:
    recs = [r for r in SessionReader(session).iter_records() if r.ok and not r.warmup]
    tpots = [r.tpot_s for r in recs if not math.isnan(r.tpot_s)]
    tokens = sum(r.output_token_count for r in recs)
    if tok_s is None:
        span = max(r.end_s for r in recs) - min(r.sent_s for r in recs)
        tok_s = tokens / span
    return Figures(
        client,
        len(recs),
        1e3 * statistics.fmean(r.ttft_s for r in recs),
        1e3 * statistics.fmean(tpots),
        tokens,
        tok_s,
        probes=INFMON_PROBES,
    )


def _vllm(spec: RunSpec, out: Path) -> Figures:
    cmd = rs.bench_ref_cmd(spec.url, out, spec.concurrency, spec.requests)
    cmd += ["--ready-check-timeout-sec", "0"]
    proc = subprocess.Popen(
        cmd, env=rs.server_env(), cwd=out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    sampler = ThreadSampler(proc.pid) if spec.threads else None
    output = proc.communicate(timeout=900)[0].decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed:\n{output[-3000:]}")
    (result,) = out.glob("*.json")
    ref = json.loads(result.read_text())
    tpot = [
        (lat - ttft) / (n - 1)
        for lat, ttft, n in zip(ref["latencies"], ref["ttfts"], ref["output_lens"], strict=True)
        if n > 1
    ]
    fig = Figures(
        "vllm",
        ref["completed"],
        1e3 * statistics.fmean(ref["ttfts"]),
        1e3 * statistics.fmean(tpot),
        ref["total_output_tokens"],
        ref["output_throughput"],
    )
    fig.threads = sampler.lines() if sampler else []
    return fig


PANES = ("Throughput", "Latency", "Server", "KV", "Events")


def _monitor(spec: RunSpec, out: Path) -> Figures:
    """The live monitor in tmux at 200×60 until it has finished ``requests`` requests; then a
    pause (its in-flight requests finish) and ``q``."""
    session = out / "session"
    tmux = Tmux(f"truth-{out.name}", out)
    cmd = [sys.executable, "-m", "infmon", "monitor", spec.url, *_load_args(spec)]
    cmd += ["--concurrency", str(spec.concurrency), "--session-dir", str(session)]
    cmd += ["--warmup", "0s"]  # as bench runs: every request the server counts is measured
    tmux.start(["env", f"PYTHONPATH={REPO}", *cmd], cwd=out, width=200, height=60)
    try:
        tmux.wait_for(lambda s: all(p in s for p in PANES), 120, "every pane drawn")
        deadline = time.monotonic() + 900
        while _count(session) < spec.requests and time.monotonic() < deadline:
            time.sleep(0.2)
        tmux.keys("Space")  # pause: the load stops sending, its requests finish
        _server_idle(spec.url)
        _settled(session)
        screen = tmux.screen()
        tmux.keys("q")
        tmux.wait_for(lambda s: tmux.pane_dead()[0], 60, "the monitor to quit")
    finally:
        tmux.close()
    fig = _from_session("monitor", session)
    fig.threads = [ln for ln in screen.splitlines() if "self-check" in ln][:2]
    return fig


def _count(session: Path) -> int:
    try:
        return SessionReader(session).record_count()
    except Exception:  # the journal is not there yet
        return 0


def _server_idle(url: str, timeout_s: float = 120.0) -> None:
    """Until the server runs and queues nothing (every request the monitor sent has ended)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = server_page(url)
        busy = sum(
            sample_sum(page, name)
            for name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
        )
        if busy == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"the server still had requests {timeout_s:.0f} s after the pause")


def _settled(session: Path, quiet_s: float = 2.0) -> None:
    last, since = -1, time.monotonic()
    while time.monotonic() - since < quiet_s:
        n = _count(session)
        if n != last:
            last, since = n, time.monotonic()
        time.sleep(0.2)


class ThreadSampler:
    """Every thread of a process tree: CPU time, run-queue wait and timeslices from
    ``/proc/PID/task/TID/schedstat`` (sampled until the tree ends; the last sample kept)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.first: dict[tuple[int, int], list[int]] = {}
        self.last: dict[tuple[int, int], list[int]] = {}
        self.names: dict[int, str] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while Path(f"/proc/{self.pid}").exists():
            for pid in rs.process_tree(self.pid):
                self._sample(pid)
            time.sleep(0.1)

    def _sample(self, pid: int) -> None:
        try:
            if pid not in self.names:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                self.names[pid] = "worker" if b"infmon.engine.worker" in args else "client"
            for task in Path(f"/proc/{pid}/task").iterdir():
                s = [int(x) for x in (task / "schedstat").read_text().split()]
                self.first.setdefault((pid, int(task.name)), s)
                self.last[(pid, int(task.name))] = s
        except (OSError, ValueError):
            return

    def lines(self) -> list[str]:
        self._thread.join(5)
        out = []
        for (pid, tid), s in sorted(self.last.items()):
            f = self.first[(pid, tid)]
            run_ms, wait_ms, n = (s[0] - f[0]) / 1e6, (s[1] - f[1]) / 1e6, s[2] - f[2]
            if run_ms >= 20:
                who = f"{self.names.get(pid, '?')} {'main' if pid == tid else tid}"
                out.append(
                    f"{who:14s} cpu {run_ms:6.0f} ms  run-queue wait {wait_ms:6.0f} ms over "
                    f"{n:5d} slices ({wait_ms / max(n, 1):5.2f} ms each)"
                )
        return out
