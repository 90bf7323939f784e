"""The simulator's /tokenize, /detokenize and HEAD /metrics answer in real vLLM's shape."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import running_sim
from tests.real.harness import rs

pytestmark = pytest.mark.real_server


def _shapes(url: str, model: str) -> dict[str, object]:
    tok = httpx.post(f"{url}/tokenize", json={"model": model, "prompt": "hello world"}).json()
    chat = httpx.post(
        f"{url}/tokenize",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
    )
    detok = httpx.post(f"{url}/detokenize", json={"model": model, "tokens": tok["tokens"]}).json()
    head = httpx.head(f"{url}/metrics")
    return {
        "tokenize": sorted(tok),
        "detokenize": sorted(detok),
        "round_trip": detok["prompt"] == "hello world",
        "chat_status": chat.status_code,
        "head": (head.status_code, head.content),
    }


def test_tokenize_shapes_match_real_vllm(vllm: rs.Server) -> None:
    real = _shapes(vllm.url, "tiny-gpt2")
    with running_sim("--served-model-name", "tiny-gpt2") as sim_url:
        ours = _shapes(sim_url, "tiny-gpt2")
    print(f"\nreal vLLM: {real}\ninfmon sim: {ours}")
    assert ours["tokenize"] == real["tokenize"]
    assert ours["detokenize"] == real["detokenize"]
    assert ours["round_trip"] and real["round_trip"]
    assert ours["head"] == real["head"] == (200, b"")
    if real["chat_status"] == 200:  # a model without a chat template answers 400
        assert ours["chat_status"] == 200
