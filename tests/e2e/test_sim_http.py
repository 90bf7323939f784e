"""The simulator over real HTTP: vLLM's wire format, the openai client, aiohttp, counters."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import aiohttp
import httpx
import openai
import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = pytest.mark.e2e
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def sse_events(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.split("\n\n") if line.startswith("data: ")]


def metric(url: str, name: str, **labels: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not found")


def test_models_health_version_tokenize(sim_url):
    models = httpx.get(f"{sim_url}/v1/models").json()
    card = models["data"][0]
    assert card["id"] == MODEL and card["root"] == MODEL and card["max_model_len"] == 32768
    assert httpx.get(f"{sim_url}/health").status_code == 200
    assert "version" in httpx.get(f"{sim_url}/version").json()
    tok = httpx.post(f"{sim_url}/tokenize", json={"model": MODEL, "prompt": "hello world"}).json()
    assert tok["count"] == 4 and len(tok["tokens"]) == 4  # "hell" "o" " wor" "ld"


def test_streaming_chat_wire_format(sim_url):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    r = httpx.post(f"{sim_url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 7
    content = [c for c in chunks[1:-1]]
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"]["content"] for c in content)
    tok = httpx.post(f"{sim_url}/tokenize", json={"prompt": text}).json()
    assert tok["count"] == 7  # the text re-tokenizes to exactly completion_tokens


def test_errors_in_vllm_shape(sim_url):
    r = httpx.post(f"{sim_url}/v1/completions", json={"model": "nope", "prompt": "x"})
    assert r.status_code == 404
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = httpx.post(
        f"{sim_url}/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 40000}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == 400
    assert "maximum context length" in r.json()["error"]["message"]


def test_openai_client_streams_and_counters_match(sim_url):
    client = openai.OpenAI(base_url=f"{sim_url}/v1", api_key="x")
    before = metric(sim_url, "vllm:generation_tokens_total")
    total = 0
    for max_tokens in (5, 12):
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "count"}],
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        chunks = list(stream)
        assert chunks[-1].usage.completion_tokens == max_tokens
        total += chunks[-1].usage.completion_tokens
    comp = client.completions.create(
        model=MODEL, prompt="once upon a time", max_tokens=9, extra_body={"min_tokens": 9}
    )
    assert comp.usage.completion_tokens == 9 and comp.choices[0].text
    total += comp.usage.completion_tokens
    assert metric(sim_url, "vllm:generation_tokens_total") - before == total


async def test_aiohttp_client_as_vllm_bench_uses_it(sim_url):
    payload = {
        "model": MODEL,
        "prompt": "a b c d",
        "max_tokens": 16,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # keep-alive: the second request reuses the connection
            async with session.post(f"{sim_url}/v1/completions", json=payload) as resp:
                assert resp.status == 200
                events = []
                async for line in resp.content:
                    if line.strip().startswith(b"data: "):
                        events.append(line.strip()[6:])
            assert events[-1] == b"[DONE]"
            assert json.loads(events[-2])["usage"]["completion_tokens"] == 16


def test_probes_answered_inside_chat(tmp_path):
    probes = tmp_path / "probes.jsonl"
    probes.write_text(
        json.dumps(
            {
                "id": "x",
                "prompt": "What is 7 * 8? Answer with the number only.",
                "expect": "56",
                "match": "exact",
            }
        )
        + "\n"
    )
    with running_sim("--probes", str(probes), "--seed", "3") as url:
        r = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": MODEL,
                "temperature": 0,
                "messages": [
                    {"role": "user", "content": "What is 7 * 8? Answer with the number only."}
                ],
            },
        )
        body = r.json()
        assert body["choices"][0]["message"]["content"] == "56"
        assert body["choices"][0]["finish_reason"] == "stop"
        assert body["usage"]["completion_tokens"] == 1


def test_sigterm_stops_cleanly():
    proc = subprocess.Popen(
        infmon_cmd("sim", "--port", "0"), cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening on http://127.0.0.1:" in line:
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert "stopped" in proc.stdout.read()


def test_list_and_help():
    out = subprocess.run(infmon_cmd("sim", "--list"), capture_output=True, text=True, cwd=REPO)
    for name in ("baseline", "fp8", "spec-good", "spec-pitfall", "tiny-kv", "contention"):
        assert name in out.stdout
    helptext = subprocess.run(
        infmon_cmd("sim", "--help"), capture_output=True, text=True, cwd=REPO
    ).stdout
    assert "metrics-truncated" in helptext and "--trace-timing" in helptext
    assert sys.executable
