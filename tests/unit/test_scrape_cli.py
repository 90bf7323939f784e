"""``infmon scrape`` as an operator reads it (issue 17, findings 13 and 15): numbers with
thousands separators and percentages, JSON whatever the server answers, no traceback into a
closed pipe, a warning when ``--backend`` contradicts the page, llama.cpp's cached-prompt and
speculative counters, a vLLM page that only declares its families."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from infmon.cli import main
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import parse_exposition
from tests.conftest import REPO, infmon_cmd

FIXTURES = REPO / "tests" / "fixtures" / "metrics"
VLLM = FIXTURES / "vllm-v1-0.10.0-glm45-ps617-part1.prom"

# llama.cpp's names for the prompt tokens served from its cache and its speculative-decoding
# counters (llama-server with --metrics, late-2025 builds); prompt_tokens_total counts only
# the tokens it evaluated. The values are made up so that both ratios are 3 of 4.
LLAMACPP_PAGE = """\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1000
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 3000
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 62570
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 100
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 400
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 300
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["scrape", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_numbers_read_as_numbers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The figures the issue saw as ``3.493e+06``, ``6.257e+04`` and ``prefix hits 0.07492``."""
    labels = '{engine="0",model_name="m"}'
    page = tmp_path / "vllm.prom"
    page.write_text(
        f"vllm:prompt_tokens_total{labels} 3493012\n"
        f"vllm:generation_tokens_total{labels} 62570\n"
        f"vllm:kv_cache_usage_perc{labels} 0.6425\n"
        f"vllm:prefix_cache_queries_total{labels} 100000\n"
        f"vllm:prefix_cache_hits_total{labels} 7492\n"
        f"vllm:num_requests_running{labels} 12\n"
    )
    code, out, _ = run(capsys, str(page))
    assert code == 0 and "e+0" not in out
    assert "tokens prompt 3,493,012" in out and "generation 62,570" in out
    assert "kv 64%" in out and "prefix hits 7.5%" in out and "running 12 " in out


def test_llamacpp_cached_prompt_and_speculative_counters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snap = snapshot_of_page(parse_exposition(LLAMACPP_PAGE))
    assert snap.backend == "llamacpp"
    assert snap.prefix_cache_hit_rate == pytest.approx(0.75)  # 3000 / (3000 + 1000)
    assert snap.prefix_cache_queries_total == 4000
    assert snap.spec_decode is not None and snap.spec_decode.acceptance_rate == pytest.approx(0.75)
    page = tmp_path / "llamacpp.prom"
    page.write_text(LLAMACPP_PAGE)
    _, out, _ = run(capsys, str(page))
    assert "prefix hits 75%" in out and "spec decode acceptance 75%" in out
    assert "generation 62,570" in out


def test_a_page_of_declarations_only_is_vllm() -> None:
    """vLLM before its first request: families declared, no values yet."""
    declared = "".join(
        line + "\n" for line in VLLM.read_text().splitlines() if line.startswith("#")
    )
    snap = snapshot_of_page(parse_exposition(declared))
    assert snap.backend == "vllm-v1" and snap.running is None


def test_a_forced_backend_that_contradicts_the_page_warns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "llamacpp.prom"
    page.write_text(LLAMACPP_PAGE)
    code, out, err = run(capsys, "--backend", "vllm-v1", str(page))
    assert code == 0 and out.startswith("backend vllm-v1")
    assert "warning: --backend vllm-v1, but the page's metric names are llamacpp's" in err
    _, _, err = run(capsys, "--backend", "vllm-v0", str(VLLM))
    assert "warning" not in err  # a choice within one family is the operator's


class _NoMetrics(BaseHTTPRequestHandler):
    status = 404

    def do_GET(self) -> None:
        body = b'{"error": {"code": 501, "message": "This server does not support metrics"}}'
        self.send_response(self.status if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[404, 501], ids=["404", "501-llamacpp-without-metrics"])
def no_metrics_url(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("H", (_NoMetrics,), {"status": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_json_on_a_server_without_metrics(
    capsys: pytest.CaptureFixture[str], no_metrics_url: str
) -> None:
    code, out, _ = run(capsys, "--json", no_metrics_url)
    doc = json.loads(out)
    assert code == 1 and doc["state"] == "no_metrics" and doc["backend"] is None
    code, out, _ = run(capsys, no_metrics_url)
    assert code == 1 and out.startswith("no server metrics")


def test_a_closed_pipe_is_not_a_traceback() -> None:
    """``infmon scrape --json … | head``: the reader went away before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run(
            infmon_cmd("scrape", "--json", str(VLLM)),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_a_p50_far_above_the_mean_says_it_is_the_buckets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM 0.32's queue-time histogram starts at a 0.3 s bucket: a real page's queue p50 reads
    150 ms beside a mean of 0.04 ms (issue 26, finding 16: no caveat). The line names the
    bucket the p50 was interpolated in and the exact mean; a p50 near its mean says nothing."""
    assert main(["scrape", str(FIXTURES / "vllm-v1-0.32-cpu-tiny-gpt2.prom")]) == 0
    out = capsys.readouterr().out
    caveats = [line for line in out.splitlines() if "caveat:" in line]
    queue = next(line for line in caveats if "queue p50" in line)
    assert "queue p50 150 ms is interpolated inside the bucket 0 ms–300 ms" in queue
    assert "mean is 0.041 ms" in queue
    assert not any(f"{name} p50" in line for line in caveats for name in ("ttft", "itl", "tpot"))
