"""``build_workload(config)``: the run's workload from the Config alone, so a worker process
can build it in its own loop. It opens its own HTTP client to the server (the load client's
settings: API key, TLS), finds the server's tokenizer, cuts the first prompts and reads any
trace or schedule. ``LazyWorkload`` does the same on first use, for callers that must hand a
workload to the driver before their loop runs."""

from __future__ import annotations

import asyncio
import random

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infmon.clock import Clock
from infmon.config import Config
from infmon.load.feed import PREBUILD_LENGTHS, Feed, WorkloadError
from infmon.load.params import ClientParams, http_client
from infmon.load.sizing import PromptMaker
from infmon.load.token_line import PROBE_SIZES_CHARS, make_counter
from infmon.load.tokenize import Counter, TokenizeError
from infmon.load.workload.corpus import make_task
from infmon.load.workload.datasets import load_dataset
from infmon.load.workload.items import Prompt, WorkItem
from infmon.load.workload.traces import Trace, read_trace
from infmon.model.records.request import RequestRecord
from infmon.model.shape.schedule import Schedule, parse_schedule
from infmon.net import FetchError, bounded_get

Local = tuple[list[Prompt] | None, Trace | None, Schedule | None]


def read_local(config: Config) -> Local:
    """The files the Config names (dataset, trace) and its schedule, read and checked."""
    try:
        trace = read_trace(config.trace) if config.trace else None
        schedule = parse_schedule(config.schedule) if config.schedule else None
        source = config.dataset or config.workload
        dataset = load_dataset(source) if source not in ("corpus", "synthetic") else None
    except ValueError as exc:
        raise WorkloadError(str(exc)) from None
    return dataset, trace, schedule


async def build_workload(
    config: Config,
    *,
    model: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Clock | None = None,
    local: Local | None = None,
) -> Feed:
    """The run's workload from the Config alone (any server calls are made here); the
    caller closes it with ``aclose()`` when the run ends. ``local`` is ``read_local(config)``
    when the caller has read the files already."""
    dataset, trace, schedule = local or read_local(config)
    if dataset is not None:
        return Feed(config, None, dataset=dataset, schedule=schedule, clock=clock)
    http = http_client(ClientParams.from_config(config), transport=transport, read_timeout_s=60.0)
    try:
        model = model or config.model or await _first_model(http)
        maker = await _prepared_maker(config, http, model, trace)
    except (TokenizeError, httpx.HTTPError, ValueError) as exc:
        await http.aclose()
        raise WorkloadError(f"cannot size prompts on {config.url}: {exc}") from None
    except BaseException:
        await http.aclose()
        raise
    feed = Feed(config, maker, trace=trace, schedule=schedule, clock=clock, http=http)
    feed.sizing = maker.sizing
    feed.server_started_s = await server_start_time(
        http, config.metrics_timeout_s, config.metrics_max_bytes
    )
    await feed.fill_ahead()
    return feed


async def server_start_time(
    http: httpx.AsyncClient, deadline_s: float = 5.0, max_bytes: int = 16 * 1024 * 1024
) -> float | None:
    """``process_start_time_seconds`` from the server's ``/metrics`` (None when absent, or
    when the page is over the run's size cap or not read within its deadline)."""
    try:
        got = await bounded_get(http, "/metrics", max_bytes=max_bytes, deadline_s=deadline_s)
        if got.status != 200:
            return None
    except (httpx.HTTPError, FetchError):
        return None
    return process_start_time(got.body)


START_TIME = "process_start_time_seconds"


def process_start_time(page: bytes) -> float | None:
    """The standard process collector's start time on an exposition page: only its own lines
    are parsed (prometheus_client's parser), so a large page costs one scan."""
    lines = [ln for ln in page.decode("utf-8", "replace").splitlines() if START_TIME in ln]
    try:
        for family in text_string_to_metric_families("\n".join(lines) + "\n"):
            if family.name == START_TIME and family.samples:
                value = float(family.samples[0].value)
                return value if value > 0 and value == value else None
    except (ValueError, TypeError, IndexError):  # a malformed line: no start time
        return None
    return None


async def _first_model(http: httpx.AsyncClient) -> str:
    resp = await http.get("/v1/models", timeout=30.0)
    try:
        return str(resp.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise WorkloadError("the server lists no model (/v1/models): give --model") from None


async def _prepared_maker(
    config: Config, http: httpx.AsyncClient, model: str, trace: Trace | None
) -> PromptMaker:
    chat = config.endpoint == "chat"
    rng = random.Random(f"probes:{config.seed}")
    probes = [Prompt(text=make_task(rng, n).render()[:n]) for n in PROBE_SIZES_CHARS]
    counter: Counter = await make_counter(http, model, chat, probes)
    blocks = trace is not None and any(e.hash_ids for e in trace.entries)
    maker = PromptMaker(
        counter,
        chat=chat,
        synthetic=config.workload == "synthetic" or blocks,
        seed=config.seed,
        prefix_tokens=config.shared_prefix_tokens,
        groups=config.prefix_groups,
        fixed_length=config.prompt_tokens.fixed and trace is None,
    )
    try:
        await maker.prepare()
    except ValueError as exc:  # a tokenizer whose counts do not grow with the text
        raise ValueError(f"{exc}, as counted by {counter.describe()}") from None
    if trace is not None:
        lengths = sorted({e.input_tokens for e in trace.entries if not e.hash_ids})
        targets = lengths[:PREBUILD_LENGTHS] or [trace.entries[0].input_tokens]
    else:
        draw = random.Random(f"verify:{config.seed}")
        targets = [config.prompt_tokens.draw(draw) for _ in range(4)]
    try:
        maker.sizing = await maker.verify(targets)
    except ValueError as exc:
        raise ValueError(f"{exc}, as counted by {counter.describe()}") from None
    return maker


class LazyWorkload:
    """A workload that builds itself (``build_workload``) on first use, in whatever loop
    uses it: made synchronously from the Config, so a command or worker can hand it to the
    driver before its loop runs. ``ready()`` builds it ahead of the first request."""

    def __init__(self, config: Config, clock: Clock | None = None) -> None:
        self.config, self.clock = config, clock
        self.local = read_local(config)
        """The dataset and trace, read now so a bad file is an error before any request."""
        self.keep_text = config.turns > 1
        self.feed: Feed | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def arrivals(self) -> bool:
        return bool(self.config.trace or self.config.schedule)

    async def ready(self, model: str | None = None) -> Feed:
        if self.feed is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self.feed is None:
                    self.feed = await build_workload(
                        self.config, model=model, clock=self.clock, local=self.local
                    )
        return self.feed

    async def next_item(self, slot: int | None) -> WorkItem:
        return await (self.feed or await self.ready()).next_item(slot)

    def finished(self, item: WorkItem, rec: RequestRecord) -> None:
        if self.feed is not None:
            self.feed.finished(item, rec)

    async def next_arrival(self) -> tuple[float, WorkItem] | None:
        return await (self.feed or await self.ready()).next_arrival()

    async def aclose(self) -> None:
        if self.feed is not None:
            await self.feed.aclose()
