"""Through a REAL Prometheus scraping two simulators' vLLM endpoints (pod labels from the scrape
config, as Kubernetes service discovery gives them) and their DCGM exporter pages (pod labels
from the exporter, ``honor_labels`` as the GPU Operator's ServiceMonitor sets): the fleet view
joins each pod with its GPU, and the neighbour on one of them (issue 22, must show 3)."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from infmon.sim.launch import stop_process
from infmon.sources.exposition import parse_exposition
from infmon.sources.gpu import dcgm_gpus
from tests.conftest import REPO, infmon_cmd, running_sim, system_tool
from tests.e2e.conftest import free_port, wait_for_scrape_after

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]

CONFIG = """global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ['{a}']
        labels: {{pod: vllm-a, namespace: llm}}
      - targets: ['{b}']
        labels: {{pod: vllm-b, namespace: llm}}
  - job_name: dcgm
    honor_labels: true
    metrics_path: /gpu-metrics
    static_configs:
      - targets: ['{a}', '{b}']
"""


def _ready(url: str) -> bool:
    want = ('count({job="vllm", __name__="vllm:num_requests_running"})', 'count({job="dcgm"})')
    for query in want:
        try:
            r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2.0)
            result = r.json()["data"]["result"] if r.status_code == 200 else []
        except (httpx.HTTPError, ValueError, KeyError):
            return False
        if not result or float(result[0]["value"][1]) < 2:
            return False
    return True


@contextmanager
def prometheus(config: str, timeout_s: float = 30.0) -> Iterator[str]:
    exe = system_tool("prometheus")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="infmon-prom-gpu-") as tmp:
        (Path(tmp) / "prometheus.yml").write_text(config)
        proc = subprocess.Popen(
            [
                exe,
                f"--config.file={tmp}/prometheus.yml",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while not _ready(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("prometheus never scraped both jobs")
                time.sleep(0.3)
            wait_for_scrape_after(url, time.time(), "up", timeout_s, proc)  # every family in
            yield url
        finally:
            stop_process(proc, 10)


def sim(name: str, scenario: str, seed: str):  # type: ignore[no-untyped-def]
    return running_sim(
        "--scenario", scenario, "--seed", seed, "--pod", name, "--namespace", "llm",
        "--gpu-hostname", f"node-{name[-1]}",
    )  # fmt: skip


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_fleet_view_joins_each_pod_with_its_gpu_and_the_neighbour() -> None:
    with sim("vllm-a", "baseline", "1") as a, sim("vllm-b", "contention", "2") as b:
        config = CONFIG.format(a=urlsplit(a).netloc, b=urlsplit(b).netloc)
        with prometheus(config) as prom:
            out = subprocess.run(
                infmon_cmd(
                    "scrape", "--json", "--prometheus", prom, "--selector", '{namespace="llm"}'
                ),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=REPO,
            )
            assert out.returncode == 0, out.stderr
            snap = json.loads(out.stdout)
            text = subprocess.run(
                infmon_cmd("scrape", "--prometheus", prom, "--selector", '{namespace="llm"}'),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=REPO,
            ).stdout
        direct_b = dcgm_gpus(parse_exposition(httpx.get(f"{b}/gpu-metrics").text))
    rows = {e["labels"]["pod"]: e for e in snap["engines"]}
    assert set(rows) == {"vllm-a", "vllm-b"}
    assert rows["vllm-a"]["gpus"] == ["node-a/0"] and rows["vllm-b"]["gpus"] == ["node-b/0"]
    gpus = {f"{g['hostname']}/{g['index']}": g for g in snap["gpus"]}
    assert set(gpus) == {"node-a/0", "node-b/0"}
    a_pods = {p["name"]: p for p in gpus["node-a/0"]["processes"]}
    b_pods = {p["name"]: p for p in gpus["node-b/0"]["processes"]}
    assert set(a_pods) == {"vllm-a"}
    assert set(b_pods) == {"vllm-b", "noisy-neighbour-0"}  # not in the selector's namespace
    assert b_pods["noisy-neighbour-0"]["namespace"] == "batch"
    (want,) = direct_b
    mem = {p.name: p.mem_used_mib for p in want.processes}
    assert b_pods["noisy-neighbour-0"]["mem_used_mib"] == mem["noisy-neighbour-0"] == 3174
    assert b_pods["vllm-b"]["mem_used_mib"] == mem["vllm-b"]
    assert b_pods["noisy-neighbour-0"]["sm_percent"] == 37
    assert gpus["node-b/0"]["mem_total_mib"] == want.mem_total_mib
    assert gpus["node-b/0"]["power_limit_w"] == 300.0 and gpus["node-a/0"]["sm_clock_mhz"] == 2505
    assert "gpus node-a/0" in text and "gpus node-b/0" in text
    assert (
        "held by vllm-b, noisy-neighbour-0" in text or "held by noisy-neighbour-0, vllm-b" in text
    )
