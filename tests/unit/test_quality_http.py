"""``run_quality`` over real HTTP against a tiny scripted server that answers most probes."""

from __future__ import annotations

import json

import httpx
import pytest

from infmon.config import build_config
from infmon.quality.probes import builtin_probes
from infmon.quality.runner import QualityError, load_baseline, run_quality


def _sse(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in (chunk, usage)) + (
        b"data: [DONE]\n\n"
    )


def _transport(wrong_ids: set[str], seen: list[dict] | None = None) -> httpx.MockTransport:
    answers = {p.prompt: (p.id, p.expect) for p in builtin_probes() if p.match != "regex"}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        body = json.loads(request.content)
        if seen is not None:
            seen.append({"body": body, "auth": request.headers.get("authorization")})
        prompt = body["messages"][0]["content"]
        if prompt != "Hello":  # the capability probe
            assert body["temperature"] == 0 and body["stream"] is True
            assert "ignore_eos" not in body and "min_tokens" not in body
        pid, answer = answers.get(prompt, ("?", "30"))
        text = "wrong" if pid in wrong_ids else answer
        return httpx.Response(
            200, content=_sse(text), headers={"content-type": "text/event-stream"}
        )

    return httpx.MockTransport(handler)


async def test_accuracy_and_agreement(tmp_path):
    probes = builtin_probes()
    config = build_config({"url": "http://sim"}, environ={}, defaults={"endpoint": "chat"})
    base = await run_quality(config, probes, transport=_transport(set()))
    assert base["model"] == "m" and base["probes"] == len(probes)
    assert base["accuracy"] == 1.0 and base["errors"] == 0
    (tmp_path / "quality.json").write_text(json.dumps(base))
    run = await run_quality(
        config,
        probes,
        baseline=load_baseline(tmp_path),
        transport=_transport({"arith-01", "capital-02"}),
    )
    assert run["correct"] == len(probes) - 2
    assert run["agreement"] == pytest.approx((len(probes) - 2) / len(probes))
    assert set(run["first_divergence"]) == {"arith-01", "capital-02"}


async def test_the_key_comes_from_the_same_config_as_every_command(tmp_path):
    """INFMON_API_KEY (and a key file, via build_config) reach the probes' requests."""
    seen: list[dict] = []
    env = {"INFMON_API_KEY": "sk-env", "INFMON_ENDPOINT": "chat"}
    config = build_config({"url": "http://sim"}, environ=env)
    await run_quality(config, builtin_probes()[:2], transport=_transport(set(), seen))
    assert seen and {s["auth"] for s in seen} == {"Bearer sk-env"}


def test_missing_baseline_is_a_clear_error(tmp_path):
    with pytest.raises(QualityError, match="no quality results"):
        load_baseline(tmp_path)
