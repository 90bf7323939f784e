"""`infmon bench` against a real vLLM, and agreement with vLLM's own benchmark client."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.real.harness import explain, get_text, infmon, rel_diff, rs, sample_sum

pytestmark = pytest.mark.real_server

LOAD = ("--prompt-tokens", "32", "--output-tokens", "32", "--endpoint", "completions")


def _bench(url: str, tmp: Path, name: str, *args: str) -> tuple[dict, Path]:
    out, session = tmp / f"{name}.json", tmp / f"{name}-session"
    proc = infmon("bench", url, *LOAD, *args, "--json", str(out), "--session-dir", str(session),
                  cwd=tmp)  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    assert str(session) in proc.stdout + proc.stderr, "the session directory is printed"
    return json.loads(out.read_text()), session


def test_bench_concurrency_steps(vllm: rs.Server, tmp_path: Path) -> None:
    before = get_text(vllm.url + "/metrics")
    data, session = _bench(vllm.url, tmp_path, "steps", "--concurrency", "1,4,16",
                           "--step-duration", "8s", "--warmup", "1s")  # fmt: skip
    after = get_text(vllm.url + "/metrics")

    assert data["schema"] == "infmon.bench/1"
    assert data["target"]["model"] == rs.MODEL_NAME
    steps = data["steps"]
    assert [s["concurrency"] for s in steps] == [1, 4, 16]
    for s in steps:
        c = s["concurrency"]
        assert s["failed"] == 0, s
        assert s["completed"] >= 5, s
        assert 10 < s["output_throughput_tok_s"] < 100_000, s
        assert 0 < s["ttft_ms"]["p50"] <= s["ttft_ms"]["p99"] < 30_000, s
        assert 0 < s["e2el_ms"]["p50"] < 60_000 and s["e2el_ms"]["p50"] >= s["ttft_ms"]["p50"], s
        assert s["tpot_ms"]["p50"] > 0, s
        assert 0.5 * c <= s["achieved_concurrency"] <= 1.05 * c, s
    assert steps[1]["output_throughput_tok_s"] > steps[0]["output_throughput_tok_s"]

    # The server saw at least everything infmon counted as completed (32 tokens each).
    completed = sum(s["completed"] for s in steps)
    ok = "vllm:request_success_total"
    finished = sample_sum(after, ok, finished_reason="length") - sample_sum(before, ok, finished_reason="length")
    generated = sample_sum(after, "vllm:generation_tokens_total") - sample_sum(before, "vllm:generation_tokens_total")
    assert finished >= completed and generated >= 32 * completed, (finished, generated, completed)

    # A session was recorded (one journal line per request at least) and reports are written from it.
    records = session / "records.jsonl"
    assert records.is_file(), f"no journal in {session}: {sorted(p.name for p in session.iterdir())}"
    assert sum(1 for _ in records.open()) >= completed
    proc = infmon("report", str(session), cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    reports = [p for p in session.rglob("report*") if p.is_file() and p.stat().st_size > 0]
    assert reports, f"no report written in {session}: {sorted(p.name for p in session.iterdir())}"


FIGURES = (  # (label, vllm bench serve key, infmon bench extractor)
    ("median TTFT ms", "median_ttft_ms", lambda s: s["ttft_ms"]["p50"]),
    ("median TPOT ms", "median_tpot_ms", lambda s: s["tpot_ms"]["p50"]),
    ("output tok/s", "output_throughput", lambda s: s["output_throughput_tok_s"]),
)


def test_agrees_with_vllm_bench_serve(vllm: rs.Server, tmp_path: Path) -> None:
    """Same server, same load, one after the other, twice each; like is compared with like.

    Each figure must agree in at least one of the two pairs (run 1 with run 1, run 2 with run 2).
    """
    runs = []
    for run in (1, 2):
        ref = rs.bench_ref(vllm.url, tmp_path / f"ref{run}", concurrency=4, num_prompts=40)
        assert ref["completed"] == 40 and ref["failed"] == 0, ref
        ours, _ = _bench(vllm.url, tmp_path, f"ours{run}", "--concurrency", "4",
                         "--step-requests", "40", "--step-duration", "300s", "--warmup", "0s")  # fmt: skip
        step = ours["steps"][0]
        assert step["failed"] == 0 and step["completed"] >= 40, step
        runs.append({label: (ref[key], get(step)) for label, key, get in FIGURES})

    print("\ninfmon bench vs vllm bench serve (concurrency 4, 40 requests, 32 in / 32 out)")
    for i, figures in enumerate(runs, 1):
        for label, (ref_v, ours_v) in figures.items():
            print(f"  run {i}  {label:15s} vllm {ref_v:10.3f}  infmon {ours_v:10.3f}"
                  f"  diff {100 * rel_diff(ref_v, ours_v):5.1f}%")  # fmt: skip
    problems = []
    for label, _, _ in FIGURES:
        diffs = [rel_diff(*figures[label]) for figures in runs]
        assert not any(math.isnan(d) for d in diffs), (label, runs)
        if min(diffs) > 0.10:
            problems.append(f"{label}: infmon differs by {[f'{100 * d:.0f}%' for d in diffs]}")
    assert not problems, "disagrees with vllm bench serve by more than 10%:\n" + "\n".join(problems)
