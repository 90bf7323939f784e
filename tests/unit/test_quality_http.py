"""``run_quality`` over real HTTP against a tiny scripted server that answers most probes."""

from __future__ import annotations

import json

import httpx
import pytest

from infmon.quality.probes import builtin_probes
from infmon.quality.runner import QualityError, load_baseline, run_quality


def _transport(wrong_ids: set[str]) -> httpx.MockTransport:
    answers = {p.prompt: (p.id, p.expect) for p in builtin_probes() if p.match != "regex"}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        body = json.loads(request.content)
        assert body["temperature"] == 0
        prompt = body["messages"][0]["content"]
        pid, answer = answers.get(prompt, ("?", "30"))
        text = "wrong" if pid in wrong_ids else answer
        return httpx.Response(
            200,
            json={"choices": [{"message": {"content": text}}], "usage": {"completion_tokens": 1}},
        )

    return httpx.MockTransport(handler)


@pytest.fixture
def patch_client(monkeypatch):
    real = httpx.AsyncClient

    def use(transport):
        def make(*args, **kwargs):
            kwargs["transport"] = transport
            return real(*args, **kwargs)

        monkeypatch.setattr(httpx, "AsyncClient", make)

    return use


async def test_accuracy_and_agreement(patch_client, tmp_path):
    probes = builtin_probes()
    patch_client(_transport(set()))
    base = await run_quality("http://sim", probes)
    assert base["model"] == "m" and base["probes"] == len(probes)
    assert base["accuracy"] == 1.0 and base["errors"] == 0
    (tmp_path / "quality.json").write_text(json.dumps(base))
    patch_client(_transport({"arith-01", "capital-02"}))
    run = await run_quality("http://sim", probes, baseline=load_baseline(tmp_path))
    assert run["correct"] == len(probes) - 2
    assert run["agreement"] == pytest.approx((len(probes) - 2) / len(probes))
    assert set(run["first_divergence"]) == {"arith-01", "capital-02"}


def test_missing_baseline_is_a_clear_error(tmp_path):
    with pytest.raises(QualityError, match="no quality results"):
        load_baseline(tmp_path)
