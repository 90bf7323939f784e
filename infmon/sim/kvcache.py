"""Paged KV blocks with prefix caching, as vLLM V1's block pool does it.

Blocks are reference counted. A full prompt block gets a hash chained over its parent's hash and
its token ids; freed hashed blocks stay cached (evictable, least recently freed first) until a new
allocation needs them. Usage counts every block not free or evictable, like vLLM's
``kv_cache_usage_perc``.
"""

from __future__ import annotations

from collections import OrderedDict, deque


def block_hashes(ids: list[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a token id sequence."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(ids[start : start + block_size])))
        out.append(parent)
    return out


class BlockPool:
    __slots__ = ("_evictable", "_free", "_hash_of", "_ref", "cached", "num_blocks")

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks))
        self._ref = [0] * num_blocks
        self._hash_of: list[int | None] = [None] * num_blocks
        self.cached: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()

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
        return hits

    def allocate(self, n: int) -> list[int] | None:
        if n > self.num_free:
            return None
        out: list[int] = []
        for _ in range(n):
            if self._free:
                block = self._free.popleft()
            else:
                block, _ = self._evictable.popitem(last=False)
                del self.cached[self._hash_of[block]]
                self._hash_of[block] = None
            self._ref[block] = 1
            out.append(block)
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
