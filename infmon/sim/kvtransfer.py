"""KV that reaches the GPU from outside the engine's own blocks: a CPU offload tier and a
disaggregated prefill pod's transfer (vLLM's KV connectors, as the simulator models them).

- **Offload** (``--kv-offloading-size GiB``, vLLM's OffloadingConnector to CPU memory): a hashed
  block evicted from the GPU pool is stored in host memory (an LRU of block hashes holding
  ``size / block bytes`` blocks); a request whose prefix continues, past the GPU's own hits, in
  host memory loads those blocks back instead of recomputing them. vLLM's CPU connector stores
  every full block as it is computed (write-through); the simulator stores at eviction, when the
  GPU cache fills, so the store traffic here is the eviction traffic.
- **P/D** (NIXL): the decode pod allocates blocks for the prompt's KV (all but the last token,
  which it computes to sample the first token) and pulls it from the prefill pod.

Either way the request waits in the queue while its KV moves (vLLM's WAITING_FOR_REMOTE_KVS,
counted as ``waiting_by_reason{reason="deferred"}``); other requests keep running. A transfer
costs ``latency + bytes / link bandwidth``: PCIe to host memory, the NIC between pods.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

GB = 1e9
HOST = "host"
P2P = "p2p"


@dataclass(frozen=True, slots=True)
class Link:
    """A transfer path: ``latency_s + bytes / (gb_s * 1e9)`` per transfer."""

    gb_s: float
    latency_s: float = 0.0

    def time_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / (self.gb_s * GB) if nbytes > 0 else 0.0


@dataclass(frozen=True, slots=True)
class KvMove:
    """One transfer the engine started: blocks and bytes moved, and how long it took."""

    kind: str
    """``host`` (offload load), ``store`` (offload store) or ``p2p`` (P/D pull)."""
    blocks: int
    nbytes: float
    time_s: float
    tokens: int = 0
    """Prompt tokens whose KV it brings (a load or pull; 0 for a store)."""


class HostTier:
    """Block hashes offloaded to host memory, least recently used evicted first."""

    __slots__ = ("_lru", "capacity")

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self._lru: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def store(self, h: int) -> bool:
        """Keep ``h``; False if it was already there (nothing moved)."""
        if h in self._lru:
            self._lru.move_to_end(h)
            return False
        if self.capacity <= 0:
            return False
        if len(self._lru) >= self.capacity:
            self._lru.popitem(last=False)
        self._lru[h] = None
        return True

    def prefix(self, hashes: list[int]) -> int:
        """How many of ``hashes``, from the first, are held (each touched: recently used)."""
        n = 0
        for h in hashes:
            if h not in self._lru:
                break
            self._lru.move_to_end(h)
            n += 1
        return n
