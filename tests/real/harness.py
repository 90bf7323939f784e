"""Helpers for the real-server suite: run infmon, read Prometheus pages, drive tmux.

The servers themselves come from ``scripts/real_servers.py`` (loaded here as ``rs``): it owns the
cached environment, the tiny model, and starting/stopping servers.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


rs = load_script("scripts/real_servers.py")

# The vLLM V1 families behind every concept of DESIGN.md section 5 (parsed family names:
# counters without `_total`, as prometheus_client's parser reports them).
CONCEPT_FAMILIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_hits",
    "vllm:prefix_cache_queries",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:num_preemptions",
    "vllm:request_success",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:iteration_tokens_total",
    "vllm:cache_config_info",
)
SPEC_FAMILIES = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
)


def infmon(
    *args: str, cwd: Path, timeout_s: float = 600.0, cpus: set[int] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run this checkout's infmon (on CPUS when given); never raises on a non-zero exit."""
    cmd = [sys.executable, "-m", "infmon", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=rs.pin_self(cpus),
    )


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


def get_text(url: str, timeout_s: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return resp.read().decode()


def post_json(url: str, body: dict, timeout_s: float = 60.0) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def complete(base_url: str, prompt: str, max_tokens: int = 16, temperature: float = 1.0) -> dict:
    """One non-streaming completion (to put something on the server's counters)."""
    body = {
        "model": rs.MODEL_NAME,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    return post_json(base_url + "/v1/completions", body)


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    label_names: frozenset[str]
    buckets: tuple[float, ...]  # histogram `le` bounds, sorted; () otherwise


def families(page: str) -> dict[str, Family]:
    """Every metric family of a Prometheus text page, by parsed family name."""
    out: dict[str, Family] = {}
    for fam in text_string_to_metric_families(page):
        labels: set[str] = set()
        bounds: set[float] = set()
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            labels.update(k for k in s.labels if k != "le")
            if "le" in s.labels:
                bounds.add(float(s.labels["le"]))
        out[fam.name] = Family(fam.name, fam.type, frozenset(labels), tuple(sorted(bounds)))
    return out


def sample_sum(page: str, sample_name: str, **match: str) -> float:
    """Sum of every sample named SAMPLE_NAME whose labels include MATCH; nan when none."""
    total, found = 0.0, False
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            if s.name == sample_name and all(s.labels.get(k) == v for k, v in match.items()):
                total += s.value
                found = True
    return total if found else math.nan


def sample_labels(page: str, sample_name: str) -> list[dict[str, str]]:
    return [
        dict(s.labels)
        for fam in text_string_to_metric_families(page)
        for s in fam.samples
        if s.name == sample_name
    ]


def rel_diff(a: float, b: float) -> float:
    """|a − b| relative to their mean (symmetric: neither side is "the truth")."""
    mean = (abs(a) + abs(b)) / 2
    return abs(a - b) / mean if mean else 0.0


# ---------------------------------------------------------------- tmux


class Tmux:
    """One detached tmux session on a private socket; ``close`` proves its processes are gone.

    The pane's process and its descendants are noted while it runs; ``close`` kills the tmux
    server (the pane gets SIGHUP), waits for every noted pid to go, SIGKILLs what is left and
    returns those pids, so a test can fail when the monitor did not exit on its own.
    """

    def __init__(self, name: str, socket_dir: Path) -> None:
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed (apt-get install tmux; .ci/run does it)")
        self.name = name
        self.base = ["tmux", "-S", str(socket_dir / "tmux.sock")]
        self.pids: set[int] = set()

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], check=True, capture_output=True, text=True
        ).stdout

    def start(self, command: list[str], cwd: Path, width: int = 160, height: int = 48) -> None:
        shell_cmd = " ".join(shlex.quote(c) for c in command)
        self.tmux(
            "new-session",
            "-d",
            "-s",
            self.name,
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(cwd),
            shell_cmd,
            ";",
            "set-option",
            "-t",
            self.name,
            "remain-on-exit",
            "on",
        )  # in one go: a fast exit stays visible)
        self.tmux("set-option", "-t", self.name, "window-size", "manual")
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))
        self.note_pids()

    def note_pids(self) -> None:
        """Remember the pane's process and its descendants (called at start and on every poll)."""
        with contextlib.suppress(subprocess.CalledProcessError, ValueError):
            pane = int(self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
            if _alive(pane):
                self.pids |= rs.process_tree(pane)

    def screen(self) -> str:
        self.note_pids()
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def pane_dead(self) -> tuple[bool, str]:
        """(dead?, "exit N" or "signal S" once the pane's process has exited).

        tmux marks a pane dead when its terminal closes and fills in the status when it reaps the
        process; tmux 3.3a was seen leaving that process a zombie, unreaped, for minutes. Until
        tmux knows the status it is read from the zombie's /proc entry (the kernel keeps it).
        """
        fmt = "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}"
        out = self.tmux("display-message", "-p", "-t", self.name, fmt).strip()
        dead, status, sig, pid = out.split("|")
        if dead != "1":
            return False, ""
        if status or sig:
            return True, f"signal {sig}" if sig else f"exit {status}"
        code = _zombie_exit_code(int(pid)) if pid.isdigit() else None
        if code is None:
            return False, ""
        return True, f"signal {code & 0x7F}" if code & 0x7F else f"exit {code >> 8}"

    def wait_for(self, predicate, timeout_s: float, what: str) -> str:
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{text}")

    def close(self, grace_s: float = 15.0) -> list[int]:
        """Kill the tmux server, then make sure every process it ran is gone.

        Returns the pids that were still alive after ``grace_s`` and had to be SIGKILLed.
        """
        self.note_pids()
        subprocess.run([*self.base, "kill-server"], capture_output=True)
        deadline = time.monotonic() + grace_s
        while any(_alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = sorted(p for p in self.pids if _alive(p))
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return leftovers


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (state) on; [] when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _zombie_exit_code(pid: int) -> int | None:
    """The wait status a zombie will report (stat field 52), None unless PID is a zombie."""
    fields = _stat_fields(pid)
    return int(fields[-1]) if len(fields) >= 50 and fields[0] == "Z" else None


def _alive(pid: int) -> bool:
    """Running (a zombie is not: it has exited and only waits to be reaped)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"
