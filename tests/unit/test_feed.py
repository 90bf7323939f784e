"""The feed the driver pulls from: exact sizing against a counter, multi-turn ordering (turn
k+1 is sent after turn k ended and carries its answer), and timed arrivals."""

from __future__ import annotations

import asyncio
import random
import re
import time

import numpy as np
import pytest

from infmon.clock import MonotonicClock
from infmon.config import build_config
from infmon.load.driver import LoadDriver
from infmon.load.feed import Feed
from infmon.load.fitting import fit_task
from infmon.load.sizing import PromptMaker
from infmon.load.workload.corpus import KINDS, make_task
from infmon.load.workload.items import Prompt
from infmon.model.records.request import RequestRecord
from infmon.model.shape.schedule import parse_schedule

PIECE = re.compile(r"\s?[A-Za-z]{1,4}|\s?\d{1,3}|\s?[^\sA-Za-z\d]|\s+")


class PieceCounter:
    """A deterministic stand-in for a server tokenizer (letters in pieces of up to 4, as
    infmon's simulator counts), plus a 3-token chat frame per message."""

    exact, error_tokens = True, 0

    def __init__(self) -> None:
        self.calls = 0

    def describe(self) -> str:
        return "exact (test counter)"

    async def count(self, prompt: Prompt) -> int:
        self.calls += 1
        if prompt.messages is not None:
            return sum(3 + len(PIECE.findall(c)) for _, c in prompt.messages)
        return len(PIECE.findall(prompt.text or ""))


@pytest.mark.parametrize("target", [80, 256, 900, 3000])
async def test_fitting_cuts_a_task_to_the_exact_count(target: int) -> None:
    counter = PieceCounter()

    async def count(text: str) -> int:
        return await counter.count(Prompt(text=text))

    task = make_task(random.Random(target), 8 * target)
    fitted = await fit_task(count, task, target)
    assert fitted is not None and fitted.exact, (fitted, target)
    assert await count(fitted.text) == target
    assert counter.calls <= 24


async def maker(chat: bool = False, **kw) -> PromptMaker:
    m = PromptMaker(PieceCounter(), chat=chat, synthetic=False, seed=5, **kw)
    await m.prepare()
    return m


@pytest.mark.parametrize("chat", [False, True])
async def test_first_turns_are_exact_unique_and_share_only_the_group_prefix(chat: bool) -> None:
    m = await maker(chat, prefix_tokens=64, groups=2)
    sizing = await m.verify([300] * 4)
    assert sizing.exact, sizing
    prompts = []
    for _ in range(20):
        conv, group = await m.first_turn(300)
        p = conv.prompt(chat)
        assert await m.counter.count(p) == 300
        prompts.append((group, p))
    texts = [p.as_text() for _, p in prompts]
    assert len(set(texts)) == 20  # a unique head on every prompt
    for g in (0, 1):
        starts = {p.as_text()[: len(m.prefixes[g])] for grp, p in prompts if grp == g}
        assert starts == {m.prefixes[g]}
    assert m.prefixes[0] != m.prefixes[1]


@pytest.mark.parametrize("chat", [False, True])
async def test_short_prompts_are_exact_for_every_seed(chat: bool) -> None:
    """Short targets leave a body of a few tokens, where a word of several tokens often
    straddles the target; the cut is then padded with single-token words (it was 1-2
    tokens short on a quarter of seeds at 32 tokens)."""
    for seed in range(12):
        m = PromptMaker(PieceCounter(), chat=chat, synthetic=False, seed=seed)
        await m.prepare()
        targets = [m._base + k for k in (1, 3, 7, 13, 20)]
        sizing = await m.verify(targets)
        assert sizing.exact, (seed, sizing)
        for target in targets:
            conv, _ = await m.first_turn(target)
            assert await m.counter.count(conv.prompt(chat)) == target, (seed, target)


async def test_a_fixed_lengths_bodies_cover_every_task_kind_for_every_seed() -> None:
    """The bodies of one fixed length take the corpus's task kinds in turn (a random pick
    left two kinds in the pool for one seed in four, and the per-task acceptance with them)."""
    for seed in range(8):
        m = PromptMaker(PieceCounter(), chat=False, synthetic=False, seed=seed)
        await m.prepare()
        kinds = {(await m.first_turn_task(300))[2] for _ in range(40)}
        assert kinds == set(KINDS), (seed, kinds)


class AnsweringClient:
    """Streams that answer ``answer-<id>``, with text only when asked (keep_text)."""

    def __init__(self, latency_s: float = 0.01) -> None:
        self.clock = MonotonicClock()
        self.latency_s = latency_s
        self.sent: list[tuple[int, Prompt, float, float]] = []

    async def stream(self, rid, prompt, out, *, on_cancel=None, keep_text=False, **kw):
        t0 = self.clock.now()
        await asyncio.sleep(self.latency_s)
        t1 = self.clock.now()
        self.sent.append((rid, prompt, t0, t1))
        return RequestRecord(
            request_id=rid,
            sent_s=t0,
            chunk_times_s=(t1,),
            end_s=t1,
            output_tokens=out,
            prompt_tokens=kw.get("prompt_tokens_requested"),
            output_text=f" answer-{rid}" if keep_text else None,
            **kw,
        )


async def run_turns(chat: bool, concurrency: int | None, rate: float | None) -> list:
    config = build_config(
        {
            "turns": "3",
            "prompt_tokens": "60",
            "output_tokens": "4",
            "seed": "9",
            "endpoint": "chat" if chat else "completions",
        },
        environ={},
    )
    feed = Feed(config, await maker(chat), clock=MonotonicClock())
    client, records = AnsweringClient(), []
    driver = LoadDriver(client, feed, records.append, client.clock)
    driver.start()
    if concurrency:
        driver.set_concurrency(concurrency)
    else:
        driver.set_rate(rate or 50, 16)
    await asyncio.sleep(0.6)
    await driver.stop(cancel_inflight=False)
    assert records and all(r.output_text is None for r in records)  # text dropped after use
    return client.sent


@pytest.mark.parametrize(("concurrency", "rate"), [(4, None), (None, 60.0)])
@pytest.mark.parametrize("chat", [False, True])
async def test_turn_k_plus_one_follows_turn_k_and_carries_its_answer(chat, concurrency, rate):
    sent = await run_turns(chat, concurrency, rate)
    by_answer = {f" answer-{rid}": (prompt, t1) for rid, prompt, _, t1 in sent}
    continued = 0
    for _rid, prompt, t0, _ in sent:
        answers = re.findall(r" answer-\d+", prompt.as_text())
        for a in answers:
            prev_prompt, prev_end = by_answer[a]
            assert prev_end <= t0  # the earlier turn had ended when this one was sent
            assert prompt.as_text().startswith(prev_prompt.as_text())  # it carries the history
        if answers:
            continued += 1
            assert len(answers) <= 2  # three turns: at most two earlier answers
            if chat:
                roles = [r for r, _ in prompt.messages or ()]
                assert roles[-1] == "user" and roles[-2] == "assistant"
    assert continued >= len(sent) // 3


async def test_think_time_delays_the_next_turn() -> None:
    config = build_config(
        {"turns": "2", "prompt_tokens": "50", "output_tokens": "4", "think_time": "150ms"},
        environ={},
    )
    feed = Feed(config, await maker(), clock=MonotonicClock())
    client, records = AnsweringClient(), []
    driver = LoadDriver(client, feed, records.append, client.clock)
    driver.start()
    driver.set_concurrency(1)
    await asyncio.sleep(0.5)
    await driver.stop(cancel_inflight=False)
    gaps = [b[2] - a[3] for a, b in zip(client.sent, client.sent[1:], strict=False)]
    assert gaps[0] >= 0.14  # turn 2 waited for the think time
    assert gaps[1] < 0.1  # a new conversation does not


async def test_schedule_arrivals_are_sent_on_time() -> None:
    config = build_config(
        {"schedule": "rate:100/1s", "prompt_tokens": "50", "output_tokens": "4"}, environ={}
    )
    feed = Feed(
        config, await maker(), schedule=parse_schedule("rate:100/1s"), clock=MonotonicClock()
    )
    client, records = AnsweringClient(latency_s=0.05), []
    driver = LoadDriver(client, feed, records.append, client.clock)
    done = asyncio.Event()
    lags: list[float] = []

    async def loop_lag() -> None:  # how late this loop wakes anyway (a loaded host's share)
        while not done.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - t0 - 0.005)

    probe = asyncio.create_task(loop_lag())
    driver.start()
    driver.set_arrivals(feed, 64, done.set)
    await asyncio.wait_for(done.wait(), 5)
    await probe
    await driver.wait_idle(5)
    late = driver.arrival_lateness_s()
    assert len(late) == len(records) == 100
    p99, stall = float(np.percentile(late, 99)), max(lags)
    print(
        f"schedule send lateness p99 {1e3 * p99:.2f} ms (the loop's own worst wake-up "
        f"{1e3 * stall:.2f}, p99 {1e3 * float(np.percentile(lags, 99)):.2f})"
    )
    # the driver adds under 20 ms of its own to the worst stall the host gave this loop in the
    # same second. p99 of 100 sends is their second-worst, so it is held against the probe's worst
    # wake-up (of ~200): against the probe's p99 one host stall that both saw failed it (88 ms
    # late with the probe's p99 at 22 beside a loaded suite)
    assert p99 < 0.02 + stall
    await driver.stop()


class SlowCounter(PieceCounter):
    """A counter that answers after a round trip, as a server's /tokenize does."""

    async def count(self, prompt: Prompt) -> int:
        await asyncio.sleep(0.002)
        return await super().count(prompt)


@pytest.mark.parametrize("budget", [1, 8, 5])
async def test_a_send_budget_at_or_below_the_concurrency_is_spent_once_its_requests_are_out(
    budget: int,
) -> None:
    """``bench --concurrency 8 --step-requests 8 --warmup 0`` measured nothing: the budget was
    said spent when the 8th send was decided, while every stream still made its prompt, so the
    step saw nothing in flight and ended before one request was sent."""
    config = build_config({"prompt_tokens": "50", "output_tokens": "4"}, environ={})
    m = PromptMaker(SlowCounter(), chat=False, synthetic=False, seed=5)
    await m.prepare()
    client, records = AnsweringClient(latency_s=0.05), []
    driver = LoadDriver(client, Feed(config, m), records.append, client.clock)
    in_flight_when_spent: list[int] = []
    spent = asyncio.Event()

    def on_spent() -> None:
        in_flight_when_spent.append(driver.inflight)
        spent.set()

    driver.limit_sends(budget, on_spent)
    driver.start()
    driver.set_concurrency(8)
    await asyncio.wait_for(spent.wait(), 5)
    assert in_flight_when_spent == [budget]  # every budgeted request is out, none more
    assert await driver.wait_idle(5)
    assert len(records) == budget and all(r.ok for r in records)
    await driver.stop()
