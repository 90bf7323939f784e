"""The driver's source of work: what each stream slot sends next, and when arrivals come.

``infmon.load.build.build_workload(config)`` makes it from the Config alone.

The driver asks ``next_item(slot)`` (a closed-loop stream slot, or None in open loop) and
hands every finished record back to ``finished``; a multi-turn conversation's next turn is
made from the answer in that record, so turn k+1 is never sent before turn k ended. In
closed loop a slot runs its conversation turn by turn; in open loop an arrival takes the next
turn of a conversation whose think time is over, else starts a new conversation. With a trace
or schedule, ``next_arrival()`` gives each send time (seconds after replay start) and item.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import dataclass, replace

import httpx

from infmon.clock import Clock, MonotonicClock
from infmon.config import Config
from infmon.load.sizing import PromptMaker, Sizing
from infmon.load.workload.conversation import Conversation
from infmon.load.workload.items import Prompt, WorkItem
from infmon.load.workload.traces import Trace, TraceEntry
from infmon.load.workload.words import random_words
from infmon.model.records.request import RequestRecord
from infmon.model.shape.lengths import Lengths
from infmon.model.shape.schedule import Schedule

CHAT_TURN = "chat-turn"
"""The task kind of a later turn of a conversation."""

PREBUILD_LENGTHS = 256
ARRIVALS_AHEAD = 512
"""Trace/schedule items made ahead of their send times."""
"""Distinct trace lengths cut before replay starts (more are cut when first needed)."""


class WorkloadError(Exception):
    """The workload cannot be built; ``str()`` is one line for the operator."""


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """What the run sent, for the session record and the report."""

    workload: str
    seed: int
    sizing: str
    exact: bool
    prompt_tokens: str
    output_tokens: str
    lockstep: bool
    shared_prefix_tokens: int
    prefix_groups: int
    turns: int
    trace: str | None
    schedule: str | None
    server_started_s: float | None = None
    """The server's ``process_start_time_seconds`` (wall clock): equal in two runs means no
    restart between them, so the second met whatever the first left in the prefix cache."""

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class Feed:
    """Work items for the driver (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        maker: PromptMaker | None,
        *,
        dataset: list[Prompt] | None = None,
        trace: Trace | None = None,
        schedule: Schedule | None = None,
        clock: Clock | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.config, self.maker = config, maker
        self._http = http
        self.chat = config.endpoint == "chat"
        self.rng = random.Random(f"feed:{config.seed}")
        self.prompt_lengths: Lengths = config.prompt_tokens
        self.output_lengths: Lengths = config.output_lengths
        self.turns = config.turns
        self.keep_text = config.turns > 1
        """The driver keeps each answer's text (only) for the next turn."""
        self.dataset = dataset
        self.trace, self.schedule = trace, schedule
        self.clock = clock or MonotonicClock()
        self.sizing = Sizing(False, 0, "not sized (dataset prompts)")
        self.server_started_s: float | None = None
        self._by_slot: dict[int, Conversation] = {}
        self._convs: dict[int, Conversation] = {}
        self._ready: deque[tuple[float, int]] = deque()
        self._next_conv = 0
        self._arrival = 0
        self._dataset_i = 0
        self._ahead: asyncio.Queue[tuple[float, WorkItem] | None] | None = None
        self._producer: asyncio.Task[None] | None = None
        if dataset is not None:
            self.rng.shuffle(self.dataset or [])

    async def aclose(self) -> None:
        """Close the tokenizer's HTTP client (lengths not cut yet can no longer be)."""
        if self._producer is not None:
            self._producer.cancel()
            await asyncio.gather(self._producer, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()

    # ------------------------------------------------------------------ info

    @property
    def arrivals(self) -> bool:
        """True when send times come from a trace or a schedule."""
        return self.trace is not None or self.schedule is not None

    def info(self) -> WorkloadInfo:
        c = self.config
        return WorkloadInfo(
            workload=c.dataset or c.workload,
            seed=c.seed,
            sizing=self.sizing.describe(),
            exact=self.sizing.exact,
            prompt_tokens=c.prompt_tokens.source if self.trace is None else "from the trace",
            output_tokens=self.output_lengths.source if self.trace is None else "from the trace",
            lockstep=c.lockstep,
            shared_prefix_tokens=c.shared_prefix_tokens,
            prefix_groups=c.prefix_groups if c.shared_prefix_tokens else 0,
            turns=c.turns,
            trace=self.trace.name if self.trace else None,
            schedule=self.schedule.spec if self.schedule else None,
            server_started_s=self.server_started_s,
        )

    # ------------------------------------------------------------------ the driver's side

    async def next_item(self, slot: int | None) -> WorkItem:
        """What ``slot`` (closed loop) or the next arrival (``None``) sends now."""
        if slot is not None:
            conv = self._by_slot.get(slot)
            if conv is not None and not conv.done and not conv.awaiting_answer:
                return await self._next_turn(conv, slot)
            self._by_slot.pop(slot, None)
            return await self._first(slot, self.prompt_lengths.draw(self.rng))
        now = self.clock.now()
        if self._ready and self._ready[0][0] <= now:
            _, cid = self._ready.popleft()
            conv = self._convs.get(cid)
            if conv is not None:
                return await self._next_turn(conv, None)
        return await self._first(None, self.prompt_lengths.draw(self.rng))

    def finished(self, item: WorkItem, rec: RequestRecord) -> None:
        """A request ended: its answer continues the conversation (a failure ends it)."""
        cid = item.conversation
        conv = self._convs.pop(cid, None) if cid is not None else None
        if conv is None:
            return
        if not rec.ok or rec.output_text is None:
            self._by_slot = {s: c for s, c in self._by_slot.items() if c.conversation_id != cid}
            return
        conv = conv.answer(rec.output_text)
        if conv.done:
            return
        self._convs[conv.conversation_id] = conv
        for s, c in self._by_slot.items():
            if c.conversation_id == conv.conversation_id:
                self._by_slot[s] = conv
                return
        self._ready.append((self.clock.now() + self.config.think_time_s, conv.conversation_id))

    async def next_arrival(self) -> tuple[float, WorkItem] | None:
        """(send time in seconds after replay start, item); None once the arrivals are over.

        Items are made ahead (up to ``ARRIVALS_AHEAD``, single-turn only) so that cutting a
        new length never delays a send; ``prefetch_arrivals`` starts that before the run."""
        if self.turns > 1:
            return await self._make_arrival()
        self.prefetch_arrivals()
        assert self._ahead is not None
        return await self._ahead.get()

    async def fill_ahead(self) -> None:
        """Make the first arrivals before replay starts (until the queue is full or done)."""
        self.prefetch_arrivals()
        if self._ahead is None or self._producer is None:
            return
        while not self._ahead.full() and not self._producer.done():
            await asyncio.sleep(0.005)

    def prefetch_arrivals(self) -> None:
        """Start making arrivals ahead of time (call inside the running loop)."""
        if self._ahead is None and self.turns == 1 and self.arrivals:
            self._ahead = asyncio.Queue(ARRIVALS_AHEAD)
            self._producer = asyncio.get_running_loop().create_task(self._produce())

    async def _produce(self) -> None:
        assert self._ahead is not None
        while True:
            arrival = await self._make_arrival()
            await self._ahead.put(arrival)
            if arrival is None:
                return

    async def _make_arrival(self) -> tuple[float, WorkItem] | None:
        i = self._arrival
        if self.trace is not None:
            if i >= len(self.trace.entries):
                return None
            entry = self.trace.entries[i]
            self._arrival += 1
            at = entry.at_s * self.config.time_scale
            return at, await self._from_trace(entry, at)
        assert self.schedule is not None
        if i >= len(self.schedule.times_s):
            return None
        self._arrival += 1
        at = self.schedule.times_s[i]
        item = await self.next_item(None)
        return at, _at(item, at)

    # ------------------------------------------------------------------ internals

    async def _first(self, slot: int | None, target: int) -> WorkItem:
        out = self.output_lengths.draw(self.rng)
        cid = self._next_conv
        self._next_conv += 1
        if self.dataset is not None:
            prompt = self.dataset[self._dataset_i % len(self.dataset)]
            self._dataset_i += 1
            return WorkItem(prompt, out)
        assert self.maker is not None
        conv, _, kind = await self.maker.first_turn_task(target, cid, self.turns)
        if self.turns > 1:
            self._convs[cid] = conv
            if slot is not None:
                self._by_slot[slot] = conv
        conversation = cid if self.turns > 1 else None
        return WorkItem(conv.prompt(self.chat), out, target, conversation, task=kind)

    async def _next_turn(self, conv: Conversation, slot: int | None) -> WorkItem:
        assert self.maker is not None
        content = await self.maker.follow_up(self.prompt_lengths.draw(self.rng))
        conv = conv.ask(content)
        self._convs[conv.conversation_id] = conv
        if slot is not None:
            self._by_slot[slot] = conv
        think = self.config.think_time_s if slot is not None else 0.0
        out = self.output_lengths.draw(self.rng)
        return WorkItem(
            conv.prompt(self.chat),
            out,
            None,
            conv.conversation_id,
            conv.sent - 1,
            think,
            task=CHAT_TURN,
        )

    async def _from_trace(self, entry: TraceEntry, at: float) -> WorkItem:
        assert self.maker is not None and self.trace is not None
        if not entry.hash_ids:
            conv, _ = await self.maker.first_turn(entry.input_tokens)
            return WorkItem(
                conv.prompt(self.chat), entry.output_tokens, entry.input_tokens, at_s=at
            )
        text = self._blocks(entry)
        prompt = self.maker.first_prompt(0, "", text).prompt(self.chat)
        return WorkItem(prompt, entry.output_tokens, entry.input_tokens, at_s=at)

    def _blocks(self, entry: TraceEntry) -> str:
        """Mooncake: one text per hash id (the same id, the same text: a shared prefix), each
        of ``block_tokens`` single-token words; the first block gives room for the template."""
        assert self.maker is not None and self.trace is not None
        size, base = self.trace.block_tokens, self.maker.empty_tokens
        left, parts = entry.input_tokens - base, []
        for k, h in enumerate(entry.hash_ids):
            n = min(left, size - (base if k == 0 else 0))
            if n <= 0:
                break
            words = random_words(
                random.Random(f"block:{self.config.seed}:{h}"), n, self.maker.words
            )
            parts.append(words)
            left -= n
        if left > 0:
            parts.append(random_words(self.rng, left, self.maker.words))
        return "".join(parts)


def _at(item: WorkItem, at: float) -> WorkItem:
    return replace(item, think_s=0.0, at_s=at)
