"""A worker's stream client over several endpoints, and the level's total on every record.

``SpreadClient`` stands in front of one ``StreamingClient`` per endpoint (``--url`` given more
than once): each request goes to the next endpoint in turn (``round-robin``) or to the one with
the fewest requests in flight from this worker (``least-inflight``, ties to the lowest index).
It notes which endpoint took each request id (``endpoint_of``, read by the outbox thread when
it encodes the record) and shares one token meter across the clients, so the worker's window
counts every endpoint's tokens. With several workers it also relabels each request with the
whole level (the driver knows only its worker's share). A single worker on a single endpoint
never goes through here: that path stays as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from infmon.load.stream_state import TokenMeter
from infmon.model.records.request import RequestRecord
from infmon.model.steps.span import CLOSED, RATE

ROUND_ROBIN = "round-robin"
LEAST_INFLIGHT = "least-inflight"
SPREADS = (ROUND_ROBIN, LEAST_INFLIGHT)


class SpreadError(Exception):
    """The endpoints do not serve the same model: one line."""


@dataclass(frozen=True, slots=True)
class _Caps:
    stream_options: bool
    vllm_fields: bool
    per_request_metrics: bool = False


class SpreadClient:
    """See the module docstring. ``clients`` are built but not yet used."""

    def __init__(self, clients: Sequence[Any], spread: str = ROUND_ROBIN) -> None:
        if not clients:
            raise ValueError("no endpoint")
        if spread not in SPREADS:
            raise ValueError(f"unknown spread {spread!r}")
        self.clients = list(clients)
        self.spread = spread
        self.meter = TokenMeter()
        for c in self.clients:
            c.meter = self.meter  # a stream reads its client's meter when it starts
        self.inflight = [0] * len(self.clients)
        self.sent = [0] * len(self.clients)
        self.endpoint_of: dict[int, int] = {}
        """Request id → endpoint index, until the outbox takes it (``pop``)."""
        self.level: tuple[str, float] | None = None
        """(mode, the whole level), for the records' ``concurrency``/``rate`` (None: leave)."""
        self.capabilities: Any = None
        self.model: str | None = None
        self._next = 0

    # ---- discovery: every endpoint must serve the model ---------------------------------------
    async def resolve_model(self) -> str:
        models = [await c.resolve_model() for c in self.clients]
        if len(set(models)) > 1:
            raise SpreadError(
                "the endpoints serve different models: "
                + ", ".join(
                    f"{c.params.base_url} {m}" for c, m in zip(self.clients, models, strict=True)
                )
            )
        self.model = models[0]
        return models[0]

    async def detect_capabilities(self) -> Any:
        caps = [await c.detect_capabilities() for c in self.clients]
        self.capabilities = _Caps(
            all(x.stream_options for x in caps),
            all(x.vllm_fields for x in caps),
            all(x.per_request_metrics for x in caps),
        )
        for c in self.clients:  # fields one endpoint rejects are sent to none
            c.capabilities = replace(
                c.capabilities,
                stream_options=self.capabilities.stream_options,
                vllm_fields=self.capabilities.vllm_fields,
            )
        return self.capabilities

    async def aclose(self) -> None:
        for c in self.clients:
            await c.aclose()

    # ---- streaming ---------------------------------------------------------------------------
    def _pick(self) -> int:
        if self.spread == LEAST_INFLIGHT:
            inflight = self.inflight
            return inflight.index(min(inflight))
        i = self._next
        self._next = (i + 1) % len(self.clients)
        return i

    def _label(self, kw: dict[str, Any]) -> None:
        level = self.level
        if level is None:
            return
        mode, total = level
        if mode == CLOSED:
            kw["concurrency"], kw["rate"] = int(total), None
        elif mode == RATE:
            kw["concurrency"], kw["rate"] = None, total

    async def stream(
        self,
        request_id: int,
        prompt: Any,
        output_tokens: int,
        *,
        on_cancel: Callable[[RequestRecord], None] | None = None,
        **kw: Any,
    ) -> RequestRecord:
        i = self._pick()
        self._label(kw)
        self.endpoint_of[request_id] = i
        self.inflight[i] += 1
        self.sent[i] += 1
        try:
            rec: RequestRecord = await self.clients[i].stream(
                request_id, prompt, output_tokens, on_cancel=on_cancel, **kw
            )
            return rec
        finally:
            self.inflight[i] -= 1
