"""Cut a task's passage so the whole prompt is exactly N tokens as the server counts them.

The count of the prompt grows (almost) monotonically with how much of the passage is kept, so
the cut is found by interpolation search over word ends (a few tokenize calls), then, when one
word of several tokens straddles the target, over the characters inside that word. The search
only needs a count, so it works with any :class:`infmon.load.tokenize.Counter`; with the
approximate counter it makes no calls at all.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from infmon.load.workload.corpus import Task

MAX_CALLS = 24
"""Count calls one fit may make before it settles for the closest cut below the target."""

CountFn = Callable[[str], Awaitable[int]]
"""The server's count of the whole prompt built around this task text."""


@dataclass(frozen=True, slots=True)
class Fitted:
    text: str
    """The task rendered with its passage cut."""
    tokens: int
    """The counted length of the whole prompt with this text."""
    target: int
    kind: str | None = None
    """The task kind the text was cut from (``summarise``, ``edit-code``, ...)."""

    @property
    def exact(self) -> bool:
        return self.tokens == self.target


def word_ends(text: str) -> list[int]:
    """Cut positions that end a word: 0, each position before a whitespace run, the end."""
    ends = [m.start() for m in re.finditer(r"(?<=\S)\s", text)]
    return [0, *ends, len(text)]


class _Search:
    def __init__(self, count: CountFn, task: Task, target: int) -> None:
        self.count, self.task, self.target = count, task, target
        self.calls = 0
        self.best: Fitted | None = None

    async def at(self, cut: int) -> int:
        self.calls += 1
        text = self.task.render(cut)
        n = await self.count(text)
        if n <= self.target and (self.best is None or n > self.best.tokens):
            self.best = Fitted(text, n, self.target, self.task.kind)
        return n

    async def bracket(self, cuts: list[int], lo: int, hi: int, f_lo: int, f_hi: int) -> int:
        """Narrow ``cuts[lo] .. cuts[hi]`` (f_lo < target < f_hi); returns the index whose
        count is the target, or -1 (adjacent cuts straddle it, or the calls ran out)."""
        bisect = False
        while hi - lo > 1 and self.calls < MAX_CALLS:
            if bisect or f_hi == f_lo:
                j = (lo + hi) // 2
            else:
                j = lo + round((self.target - f_lo) * (hi - lo) / (f_hi - f_lo))
                j = min(hi - 1, max(lo + 1, j))
            f = await self.at(cuts[j])
            if f == self.target:
                return j
            side_lo = f < self.target
            if side_lo:
                lo, f_lo = j, f
            else:
                hi, f_hi = j, f
            bisect = not bisect  # interpolation then bisection: never slow on a bad guess
        return -1


async def fit_task(count: CountFn, task: Task, target: int) -> Fitted | None:
    """The task with its passage cut so the prompt counts ``target`` tokens (or the closest
    count below it when no cut gives it exactly); None when even the whole passage is short."""
    s = _Search(count, task, target)
    cuts = word_ends(task.passage)
    f_lo = await s.at(0)
    if f_lo >= target:
        return Fitted(task.render(0), f_lo, target, task.kind)
    f_hi = await s.at(cuts[-1])
    if f_hi < target:
        return None
    if f_hi == target:
        return Fitted(task.render(), f_hi, target, task.kind)
    j = await s.bracket(cuts, 0, len(cuts) - 1, f_lo, f_hi)
    if j >= 0:
        return Fitted(task.render(cuts[j]), target, target, task.kind)
    if s.best is not None and s.calls < MAX_CALLS:
        await _inside_word(s, cuts)
    assert s.best is not None
    return s.best


async def _inside_word(s: _Search, cuts: list[int]) -> None:
    """Two adjacent word ends straddle the target: try cuts between their characters."""
    best = s.best
    assert best is not None
    start = len(best.text) - len(s.task.closing) - len(s.task.instruction)
    nxt = next((c for c in cuts if c > start), None)
    if nxt is None:
        return
    chars = list(range(start + 1, nxt))
    lo, hi = -1, len(chars)
    while hi - lo > 1 and s.calls < MAX_CALLS:
        mid = (lo + hi) // 2
        f = await s.at(chars[mid])
        if f == s.target:
            return
        if f < s.target:
            lo = mid
        else:
            hi = mid
