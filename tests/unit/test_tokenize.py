"""The server-tokenizer client against scripted servers of each API shape (vLLM/SGLang,
llama.cpp, TGI, none): detection, counting, the probe correction, the approximate line."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from infmon.load import tokenize
from infmon.load.token_line import ApproxCounter, make_counter
from infmon.load.tokenize import ServerTokenizer
from infmon.load.workload.items import Prompt


def words(text: str) -> list[int]:
    return [len(w) for w in text.split()]


def server(kind: str, bos: int = 0):
    """A scripted server: tokenize API of ``kind``; generation usage counts words (+ bos,
    + 4 per chat message for its template)."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        path = request.url.path
        if path == "/tokenize" and kind == "vllm" and "model" in body:
            if "messages" in body:
                ids = [1] * sum(4 + len(m["content"].split()) for m in body["messages"])
            else:
                ids = [1] * bos + words(body["prompt"])
            return httpx.Response(200, json={"count": len(ids), "tokens": ids})
        if path == "/tokenize" and kind == "llamacpp" and "content" in body:
            return httpx.Response(200, json={"tokens": words(body["content"])})
        if path == "/detokenize" and kind in ("vllm", "llamacpp"):
            return httpx.Response(200, json={"prompt" if kind == "vllm" else "content": "x"})
        if path == "/tokenize" and kind == "tgi" and "inputs" in body:
            return httpx.Response(200, json=[{"id": i} for i in words(body["inputs"])])
        if path.startswith("/v1/"):
            if "messages" in body:
                n = sum(4 + len(m["content"].split()) for m in body["messages"])
            else:
                n = bos + len(body["prompt"].split())
            usage = {"prompt_tokens": n, "completion_tokens": 1}
            chunk = json.dumps({"choices": [], "usage": usage})
            return httpx.Response(200, content=f"data: {chunk}\n\ndata: [DONE]\n\n".encode())
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.AsyncClient(base_url="http://x", transport=httpx.MockTransport(handler))


PROBES = [Prompt(text="one two three " * k) for k in (5, 20, 60)]


@pytest.mark.parametrize("kind", ["vllm", "llamacpp", "tgi"])
@pytest.mark.parametrize("chat", [False, True])
async def test_each_tokenize_api_counts_what_generation_counts(kind: str, chat: bool) -> None:
    async with server(kind, bos=1 if kind == "vllm" else 0) as http:
        counter = await make_counter(http, "m", chat, PROBES)
        assert isinstance(counter, ServerTokenizer) and counter.exact
        assert counter.info is not None and counter.info.kind == kind
        assert counter.info.detokenize == (kind != "tgi")
        assert counter.info.counts_chat == (kind == "vllm")
        p = Prompt(messages=(("system", "be brief"), ("user", "a b c d")))
        expected = (4 + 2) + (4 + 4) if chat else (1 if kind == "vllm" else 0) + 6
        if not chat:
            p = Prompt(text="be brief a b c d")
        assert await counter.count(p) == expected


async def test_no_tokenize_endpoint_is_approximate_with_its_error() -> None:
    async with server("none") as http:
        counter = await make_counter(http, "m", False, PROBES)
    assert isinstance(counter, ApproxCounter) and not counter.exact
    assert counter.error_tokens >= 1
    assert counter.describe().startswith(f"approximate (±{counter.error_tokens} tokens")
    n = await counter.count(Prompt(text="one two three " * 40))
    assert abs(n - 120) <= counter.error_tokens + 1


def slow_vllm(delay_s: float) -> httpx.AsyncClient:
    """A vLLM tokenize API that takes ``delay_s`` to answer each call."""

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(delay_s)
        body = json.loads(request.content or b"{}")
        ids = words(body.get("prompt", "x"))
        return httpx.Response(200, json={"count": len(ids), "tokens": ids})

    return httpx.AsyncClient(base_url="http://x", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("starved", [False, True])
async def test_the_budget_counts_the_servers_time_not_the_clients_wait_for_a_cpu(
    starved: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up's tokenizer calls share one budget (``TOKENIZE_BUDGET_S``). A client starved of
    CPU (the kernel's schedstat: its thread runnable, no CPU free, for the whole call) spent
    that time waiting for itself, not for the server: it is not charged. CI once failed a
    bench pinned beside six CPU hogs with "/tokenize: no complete answer within 0.004 s": its
    start-up had been charged its own 60 s of waits."""
    loop = asyncio.get_running_loop()
    # the thread's run-queue wait: all of the call's time when starved, none otherwise
    sched = (lambda: (0.0, loop.time(), 1)) if starved else (lambda: (0.0, 0.0, 1))
    monkeypatch.setattr(tokenize, "thread_sched", sched)
    monkeypatch.setattr(tokenize, "TOKENIZE_BUDGET_S", 0.1)
    async with slow_vllm(0.03) as http:
        counter = ServerTokenizer(http, "m", chat=False)
        counter.info = tokenize.TokenizerInfo("vllm", False, True)
        if starved:
            for _ in range(8):  # 0.24 s of calls, every moment of it the client's own wait
                assert await counter.token_ids("a bb ccc") == [1, 2, 3]
            assert counter.spent_s < 0.02
        else:
            with pytest.raises(
                tokenize.TokenizeError, match=r"took over 0.1 s in \d+ calls; too slow"
            ):
                for _ in range(8):
                    await counter.token_ids("a bb ccc")


@pytest.mark.parametrize("starved", [False, True])
async def test_a_calls_deadline_counts_the_servers_time_and_a_starved_one_ends_too(
    starved: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One call's deadline (``TOKENIZE_TIMEOUT_S``) is the server's time as well: a call whose
    wall time was all the client's own wait for a CPU is not cut short by it (the budget's end
    once told a starved bench "no complete answer within 0.004 s"); however starved, it ends
    at ``STARVED_WALL_FACTOR`` times the deadline in wall time."""
    loop = asyncio.get_running_loop()
    sched = (lambda: (0.0, loop.time(), 1)) if starved else (lambda: (0.0, 0.0, 1))
    monkeypatch.setattr(tokenize, "thread_sched", sched)
    body = {"model": "m", "prompt": "a bb ccc"}
    async with slow_vllm(0.15) as http:  # three times the deadline
        if starved:
            status, _ = await tokenize.post_bytes(http, "/tokenize", body, deadline_s=0.05)
            assert status == 200
        t0 = loop.time()
        with pytest.raises(tokenize.TokenizeTimeout, match=r"no complete answer within 0.03 s"):
            await tokenize.post_bytes(http, "/tokenize", body, deadline_s=0.03)
        waited = loop.time() - t0
        factor = tokenize.STARVED_WALL_FACTOR if starved else 1.0
        assert 0.03 * factor - 0.005 <= waited < 0.03 * factor + 1.0
