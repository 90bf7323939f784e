"""``infmon sim --firehose``: OpenAI-shaped streams with no engine, as fast as the socket takes them."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.conftest import running_sim

pytestmark = pytest.mark.e2e


def test_firehose_streams_max_tokens_chunks_with_usage_and_done():
    with running_sim("--firehose", "--served-model-name", "fh") as url:
        assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == "fh"
        body = {
            "model": "fh",
            "prompt": "x",
            "max_tokens": 5000,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        t0 = time.perf_counter()
        text = httpx.post(f"{url}/v1/completions", json=body, timeout=30).text
        elapsed = time.perf_counter() - t0
        events = [e[6:] for e in text.split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert len(chunks) == 5001 and chunks[-1]["usage"]["completion_tokens"] == 5000
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        print(f"\nfirehose: 5,000 chunks in {elapsed * 1e3:.1f} ms")
        assert elapsed < 2.0  # no engine steps: bounded by the socket, not by simulated time

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x")
        stream = client.chat.completions.create(
            model="fh",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=7,
            stream=True,
            stream_options={"include_usage": True},
        )
        got = list(stream)
        assert got[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == " the" * 7
        assert got[-1].usage.completion_tokens == 7
        whole = client.completions.create(model="fh", prompt="x", max_tokens=3)
        assert whole.choices[0].text == " the" * 3 and whole.usage.completion_tokens == 3
