"""The simulator's vLLM-compatible /tokenize and /detokenize, HEAD /metrics, the HTTP
instrumentator's families and the prefix cache seeing a shared system prompt (issues 15, 17, 18)."""

from __future__ import annotations

import random
import subprocess

import aiohttp
import httpx
import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = pytest.mark.e2e
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not found")


def prompt_of_exactly(url: str, n: int, seed: int) -> str:
    """What a client does: tokenize some text, cut the ids to N, detokenize."""
    rng = random.Random(seed)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "3.14159",
        "and",
        "42,",
        "(x)",
        "Naive",
    ]
    text = " ".join(rng.choice(words) for _ in range(n))
    ids = httpx.post(f"{url}/tokenize", json={"model": MODEL, "prompt": text}).json()["tokens"]
    assert len(ids) >= n
    back = httpx.post(f"{url}/detokenize", json={"model": MODEL, "tokens": ids[:n]}).json()
    return back["prompt"]


@pytest.mark.parametrize("n", [32, 256, 900])
def test_a_client_builds_prompts_of_exactly_n_tokens(sim_url, n):
    text = prompt_of_exactly(sim_url, n, n)
    tok = httpx.post(f"{sim_url}/tokenize", json={"model": MODEL, "prompt": text}).json()
    assert tok["count"] == n and tok["max_model_len"] == 32768
    again = httpx.post(f"{sim_url}/detokenize", json={"model": MODEL, "tokens": tok["tokens"]})
    assert again.json() == {"prompt": text}
    body = {"model": MODEL, "prompt": text, "max_tokens": 2}
    usage = httpx.post(f"{sim_url}/v1/completions", json=body, timeout=30).json()["usage"]
    assert usage["prompt_tokens"] == n


def test_chat_tokenize_counts_the_template_as_a_chat_request_does(sim_url):
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three primes."},
    ]
    tok = httpx.post(f"{sim_url}/tokenize", json={"model": MODEL, "messages": messages}).json()
    no_gen = httpx.post(
        f"{sim_url}/tokenize",
        json={"model": MODEL, "messages": messages, "add_generation_prompt": False},
    ).json()
    assert tok["count"] == no_gen["count"] + 5  # "<|im_start|>" "ass" "ist" "ant" "\n"
    body = {"model": MODEL, "messages": messages, "max_tokens": 2}
    usage = httpx.post(f"{sim_url}/v1/chat/completions", json=body, timeout=30).json()["usage"]
    assert usage["prompt_tokens"] == tok["count"]


def test_ids_round_trip_through_detokenize_for_any_text(sim_url):
    text = "naïve café, π ≈ 3.14159\n\n  indented\tand <|im_end|> odd  \n spacing"
    ids = httpx.post(f"{sim_url}/tokenize", json={"prompt": text}).json()["tokens"]
    back = httpx.post(f"{sim_url}/detokenize", json={"tokens": ids}).json()["prompt"]
    assert back == text
    assert httpx.post(f"{sim_url}/tokenize", json={"prompt": back}).json()["tokens"] == ids


def test_tokenize_errors_in_vllm_shape(sim_url):
    r = httpx.post(f"{sim_url}/detokenize", json={"model": MODEL, "tokens": [10**9]})
    assert r.status_code == 400 and "out of vocabulary" in r.json()["error"]["message"]
    r = httpx.post(f"{sim_url}/tokenize", json={"model": "nope", "prompt": "x"})
    assert r.status_code == 404


def test_a_shared_system_prompt_hits_the_prefix_cache():
    with running_sim("--seed", "2") as url:
        system = prompt_of_exactly(url, 512, 7)
        before_q = metric(url, "vllm:prefix_cache_queries_total")
        before_h = metric(url, "vllm:prefix_cache_hits_total")
        for i in range(4):
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": f"question number {i}: why?"},
            ]
            body = {"model": MODEL, "messages": messages, "max_tokens": 2}
            assert (
                httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code == 200
            )
        queries = metric(url, "vllm:prefix_cache_queries_total") - before_q
        hits = metric(url, "vllm:prefix_cache_hits_total") - before_h
    print(
        f"\nshared 512-token system prompt, 4 requests: prefix-cache hit rate {hits / queries:.2f}"
    )
    assert hits / queries > 0.6  # the three requests after the first reuse its blocks


async def test_head_metrics_is_200_without_a_body(sim_url):
    async with aiohttp.ClientSession() as session, session.head(f"{sim_url}/metrics") as r:
        assert r.status == 200
        assert await r.read() == b""
    r = httpx.get(f"{sim_url}/metrics")
    assert (
        "http_requests_total{" in r.text and "http_request_duration_highr_seconds_bucket" in r.text
    )


def test_a_mismatched_draft_model_is_refused_with_vllms_message():
    out = subprocess.run(
        infmon_cmd("sim", "--draft-model", "Qwen/Qwen2.5-0.5B-Instruct", "--speculative-k", "4"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "Target and draft model should have the same vocabulary size" in out.stderr
