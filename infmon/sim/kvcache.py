"""Paged KV blocks with prefix caching, as vLLM V1's block pool does it.

Blocks are reference counted. A full prompt block gets a hash chained over its parent's hash and
its token ids; freed hashed blocks stay cached (evictable, least recently freed first) until a new
allocation needs them. Usage counts every block not free or evictable, like vLLM's
``kv_cache_usage_perc``.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict, deque
from dataclasses import dataclass

from infmon.sim.kvtransfer import HostTier

KV_METRICS_SAMPLE = 0.01  # vLLM's default --kv-cache-metrics-sample


@dataclass(frozen=True, slots=True)
class EvictionEvent:
    """A sampled block's residency, as vLLM's KV-cache metrics record it at eviction."""

    lifetime_s: float
    idle_s: float
    reuse_gaps_s: tuple[float, ...]


def block_hashes(ids: list[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a token id sequence."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(ids[start : start + block_size])))
        out.append(parent)
    return out


class BlockPool:
    __slots__ = (
        "_evictable",
        "_free",
        "_hash_of",
        "_ref",
        "_rng",
        "_sampled",
        "cached",
        "events",
        "host",
        "now_s",
        "num_blocks",
        "stored",
        "track",
    )

    def __init__(self, num_blocks: int, track: bool = False, seed: int = 0) -> None:
        self.num_blocks = num_blocks
        self.track = track  # --kv-cache-metrics: sample blocks and record their evictions
        self.now_s = 0.0
        self._rng = random.Random(seed)
        self._sampled: dict[int, list[float]] = {}  # block -> [allocated, touches...]
        self.events: list[EvictionEvent] = []
        self._free: deque[int] = deque(range(num_blocks))
        self._ref = [0] * num_blocks
        self._hash_of: list[int | None] = [None] * num_blocks
        self.cached: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self.host: HostTier | None = None
        """The offload tier: a cached block evicted from the GPU is stored there."""
        self.stored = 0
        """Blocks stored to the host tier since the engine last took the count."""

    @property
    def num_free(self) -> int:
        return len(self._free) + len(self._evictable)

    @property
    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks if self.num_blocks else 0.0

    def lookup(self, hashes: list[int], max_blocks: int) -> list[int]:
        """Take a reference on the longest cached prefix (at most ``max_blocks`` blocks)."""
        hits: list[int] = []
        for h in hashes[:max_blocks]:
            block = self.cached.get(h)
            if block is None:
                break
            if self._ref[block] == 0:
                del self._evictable[block]
            self._ref[block] += 1
            hits.append(block)
            if block in self._sampled:
                self._sampled[block].append(self.now_s)
        return hits

    def allocate(self, n: int) -> list[int] | None:
        if n > self.num_free:
            return None
        out: list[int] = []
        for _ in range(n):
            if self._free:
                block = self._free.popleft()
                self._evicted(block)
            else:
                block, _ = self._evictable.popitem(last=False)
                h = self._hash_of[block]
                if h is not None:
                    del self.cached[h]
                    if self.host is not None and self.host.store(h):
                        self.stored += 1
                self._hash_of[block] = None
                self._evicted(block)
            self._ref[block] = 1
            out.append(block)
            if self.track and self._rng.random() < KV_METRICS_SAMPLE:
                self._sampled[block] = [self.now_s]
        return out

    def _evicted(self, block: int) -> None:
        if not self._sampled:
            return
        times = self._sampled.pop(block, None)
        if times is None:
            return
        gaps = tuple(b - a for a, b in itertools.pairwise(times))
        self.events.append(EvictionEvent(self.now_s - times[0], self.now_s - times[-1], gaps[-8:]))

    def drain_events(self) -> list[EvictionEvent]:
        out, self.events = self.events, []
        return out

    def release(self, blocks: list[int]) -> None:
        # Free in reverse so a request's tail blocks are evicted before its prefix.
        for block in reversed(blocks):
            self._ref[block] -= 1
            if self._ref[block] == 0:
                if self._hash_of[block] is not None:
                    self._evictable[block] = None
                else:
                    self._free.append(block)

    def register(self, block: int, h: int) -> None:
        """Mark a computed full block as reusable under hash ``h`` (first writer wins)."""
        if h not in self.cached and self._hash_of[block] is None:
            self.cached[h] = block
            self._hash_of[block] = h
