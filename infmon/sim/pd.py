"""Disaggregated prefill/decode (``infmon sim --pd``): two simulated vLLM pods in one process.

The decode pod serves the API (as llm-d's routing sidecar does on the decode pod): a request
goes first to the prefill pod as a ``max_tokens=1`` request, whose engine computes the prompt's
KV; when that step is delivered, the request reaches the decode pod's scheduler, which
allocates blocks for the prompt (all but the last token) and pulls the KV over NIXL
(``infmon.sim.kvtransfer``: the request waits, deferred, for ``latency + bytes / link``), then
computes the last prompt token, samples the first and decodes. Each pod has its own engine, KV
cache, GPU and ``/metrics``: the prefill pod counts the prompt as ``local_compute`` and one
generated token per request; the decode pod counts it as ``external_kv_transfer`` and records
each pull in ``vllm:nixl_*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from infmon.sim.engine import Sequence


class DecodePod(Protocol):
    def enqueue_local(self, seq: Sequence, ids: list[int]) -> None: ...


@dataclass(slots=True)
class Handoff:
    """A prefill pod's request: the decode pod's request it computes the prompt for."""

    decode: DecodePod
    seq: Sequence
    ids: list[int]

    def prefilled(self) -> None:
        """The prefill step was delivered: the request moves on to the decode pod."""
        self.decode.enqueue_local(self.seq, self.ids)


def prefill_request(seq: Sequence, decode: DecodePod, ids: list[int], now_s: float) -> Sequence:
    """The prefill pod's own request for ``seq``'s prompt (``max_tokens=1``, as the proxy
    sends it)."""
    p = Sequence(
        f"{seq.req_id}-prefill",
        seq.prompt_len,
        1,
        None,
        now_s,
        handle=Handoff(decode, seq, ids),
    )
    p.queued_s = now_s
    return p
