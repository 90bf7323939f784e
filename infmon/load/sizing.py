"""Prompts of an exact length, counted by the server: a shared prefix, a unique head, a body.

Every first-turn prompt is ``[prefix of its group] + head + body``:

- the **prefix** (``--shared-prefix-tokens``): one system prompt per group, cut so that the
  prefix alone counts the requested tokens; it is the only part requests share;
- the **head**: ``HEAD_WORDS`` random words that are single tokens on this server (checked),
  so every prompt differs right after the prefix and no cache can serve the rest; its count
  is the same whatever words are drawn;
- the **body**: a corpus task with its passage cut (``infmon.load.fitting``) so that the whole
  prompt counts the target, or for the synthetic workload that many more single-token words.

Bodies are cut once per target length and cached (several per length when the length is
fixed, for variety), so after the first request of a length no tokenize call is made. A few
assembled prompts are counted again at the start; any miss makes the sizing "approximate".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from infmon.load.fitting import CountFn, Fitted, fit_task
from infmon.load.tokenize import Counter, gather_limited
from infmon.load.workload.conversation import Conversation, start
from infmon.load.workload.corpus import KINDS, Task, follow_up, make_task, system_prompt
from infmon.load.workload.items import Prompt
from infmon.load.workload.words import RANDOM_WORDS, WORDS, random_words

HEAD_WORDS = 5
"""Random single-token words at the head of each prompt (5 of ~100: 10^10 heads)."""
HEAD_LABEL = "Ticket"
BODIES_PER_LENGTH = len(KINDS)
"""Bodies cut per fixed length, one per task kind (distributions get one per length drawn)."""
CHARS_PER_TOKEN = 6
"""Passage characters to start from per requested token (generous; doubled when short)."""
MIN_SINGLE_WORDS = 8
RETRIES = 3
"""Other passages tried when no cut of one gives the exact length."""


@dataclass(frozen=True, slots=True)
class Sizing:
    """How exactly prompts are sized (recorded in the session, shown in reports)."""

    exact: bool
    error_tokens: int
    method: str
    """The counter's own description (it says "approximate" when it is)."""
    counted_exactly: bool = True
    """The counter is the server's tokenizer (misses then come from cutting the text)."""

    def describe(self) -> str:
        if self.exact or not self.counted_exactly:
            return self.method
        return (
            f"approximate (±{self.error_tokens} tokens: no cut of the text hit every length "
            f"exactly; counted with {self.method.removeprefix('exact (').rstrip(')')})"
        )


class PromptMaker:
    """Builds first turns of a target length and later user turns; async (it may count)."""

    def __init__(
        self,
        counter: Counter,
        *,
        chat: bool,
        synthetic: bool,
        seed: int,
        prefix_tokens: int = 0,
        groups: int = 1,
        fixed_length: bool = True,
    ) -> None:
        self.counter, self.chat, self.synthetic = counter, chat, synthetic
        self.rng = random.Random(f"prompts:{seed}")
        self.prefix_tokens, self.groups = prefix_tokens, groups
        self.pool = BODIES_PER_LENGTH if fixed_length else 1
        self.words: tuple[str, ...] = WORDS
        self.prefixes: tuple[str, ...] = ()
        self._bodies: dict[int, list[tuple[str, str | None]]] = {}
        """Cut bodies per target length, with the task kind each was cut from."""
        self._cutting: dict[int, asyncio.Task[tuple[str, str | None]]] = {}
        self._kinds = list(KINDS)
        random.Random(f"kinds:{seed}").shuffle(self._kinds)
        """Cuts take the task kinds in turn (a seeded order): a fixed length's bodies cover
        every kind, a distribution's lengths cycle through them (a random pick left a
        fixed length's pool with two kinds one seed in four)."""
        self._cuts = 0
        self._base = 0
        """Count of prefix + head with an empty body (the synthetic workload adds words)."""
        self.empty_tokens = 0
        """Count of the prompt frame alone (no head, no body): trace blocks fill the rest."""
        self.miss_tokens = 0
        self.sizing = Sizing(
            counter.exact, counter.error_tokens, counter.describe(), counted_exactly=counter.exact
        )

    # ------------------------------------------------------------------ preparation

    async def prepare(self) -> None:
        """Find the single-token words, cut the group prefixes, measure the empty prompt."""
        if self.counter.exact:
            self.words = await single_token_words(self.counter, WORDS)
        if self.prefix_tokens:
            self.prefixes = tuple(
                await gather_limited(4, [self._cut_prefix(g) for g in range(self.groups)])
            )
        self._base = await self.counter.count(
            self.first_prompt(0, self.head(), "").prompt(self.chat)
        )
        self.empty_tokens = await self.counter.count(self.first_prompt(0, "", "").prompt(self.chat))

    async def _cut_prefix(self, group: int) -> str:
        rng = random.Random(f"prefix:{self.rng.random()}:{group}")

        async def count(text: str) -> int:
            return await self.counter.count(start(0, 1, text).prompt(self.chat))

        fitted = await _fit_growing(
            count, lambda n: system_prompt(group, rng, n), self.prefix_tokens
        )
        for _ in range(RETRIES):
            if fitted.exact:
                break
            fitted = await _fit_growing(
                count, lambda n: system_prompt(group, rng, n), self.prefix_tokens
            )
        self.miss_tokens = max(self.miss_tokens, abs(fitted.tokens - self.prefix_tokens))
        return fitted.text

    async def verify(self, targets: list[int]) -> Sizing:
        """Count a few assembled prompts again; any miss is the ± of "approximate"."""
        worst = self.miss_tokens
        for target in targets:
            conv, _ = await self.first_turn(target)
            got = await self.counter.count(conv.prompt(self.chat))
            worst = max(worst, abs(got - target))
        method = self.counter.describe()
        if not self.counter.exact:
            return Sizing(False, max(worst, self.counter.error_tokens), method, False)
        return Sizing(worst == 0, worst, method)

    # ------------------------------------------------------------------ prompts

    def head(self, rng: random.Random | None = None) -> str:
        return HEAD_LABEL + random_words(rng or self.rng, HEAD_WORDS, self.words) + "\n"

    def first_prompt(self, group: int, head: str, body: str) -> Conversation:
        system = self.prefixes[group] if self.prefixes else None
        return start(0, 1, system).ask(head + body)

    async def first_turn(
        self, target: int, conversation_id: int = 0, turns: int = 1
    ) -> tuple[Conversation, int]:
        """A new conversation whose first prompt counts ``target`` tokens; (it, group)."""
        conv, group, _ = await self.first_turn_task(target, conversation_id, turns)
        return conv, group

    async def first_turn_task(
        self, target: int, conversation_id: int = 0, turns: int = 1
    ) -> tuple[Conversation, int, str | None]:
        """``first_turn`` and the task kind of its body (``random-words`` when synthetic)."""
        group = self.rng.randrange(self.groups) if self.prefixes else 0
        head = self.head()
        short = self._base - target
        system = self.prefixes[group] if self.prefixes else None
        if 0 < short < HEAD_WORDS:  # shorter than the frame: fewer head words, no body
            words = random_words(self.rng, HEAD_WORDS - short, self.words)
            conv = start(conversation_id, turns, system).ask(HEAD_LABEL + words + "\n")
            return conv, group, RANDOM_WORDS
        kind: str | None = RANDOM_WORDS
        if self.synthetic:
            body = random_words(self.rng, max(0, target - self._base), self.words)
        else:
            bodies = self._bodies.get(target, [])
            body, kind = (
                self.rng.choice(bodies)
                if len(bodies) >= self.pool
                else await self._new_body(target)
            )
        return start(conversation_id, turns, system).ask(head + body), group, kind

    async def _new_body(self, target: int) -> tuple[str, str | None]:
        """Cut one more body for ``target`` (concurrent asks for one length share the cut)."""
        task = self._cutting.get(target)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._cut_body(target))
            self._cutting[target] = task
            task.add_done_callback(lambda _: self._cutting.pop(target, None))
        return await asyncio.shield(task)

    async def _cut_body(self, target: int) -> tuple[str, str | None]:
        rng = random.Random(f"body:{self.rng.random()}")
        head = self.head(random.Random(0))
        kind = self._kinds[self._cuts % len(self._kinds)]
        self._cuts += 1

        async def count(text: str) -> int:
            return await self.counter.count(self.first_prompt(0, head, text).prompt(self.chat))

        def make(n: int) -> Task:
            return make_task(rng, n, kind)

        fitted = await _fit_growing(count, make, target)
        if fitted.tokens > target:  # the task's own words are longer than the target

            def make(n: int) -> Task:
                return _plain(make_task(rng, n, kind))

            fitted = await _fit_growing(count, make, target)
        for _ in range(RETRIES):  # no cut of this passage hits it: another passage may
            if fitted.exact:
                break
            again = await _fit_growing(count, make, target)
            fitted = again if abs(again.tokens - target) < abs(fitted.tokens - target) else fitted
        if not fitted.exact:
            fitted = await self._pad(count, fitted, rng)
        self.miss_tokens = max(self.miss_tokens, abs(fitted.tokens - target))
        self._bodies.setdefault(target, []).append((fitted.text, fitted.kind))
        return fitted.text, fitted.kind

    async def _pad(self, count: CountFn, fitted: Fitted, rng: random.Random) -> Fitted:
        """A cut that falls short (a word of several tokens straddles the target, common
        for short prompts): append the missing count in single-token words, then count."""
        for _ in range(RETRIES):
            short = fitted.target - fitted.tokens
            if short <= 0:
                break
            text = fitted.text + random_words(rng, short, self.words)
            got = await count(text)
            if got == fitted.target:
                return Fitted(text, got, fitted.target, fitted.kind)
            if got < fitted.target:
                fitted = Fitted(text, got, fitted.target, fitted.kind)
        return fitted

    async def follow_up(self, target: int) -> str:
        """A later user turn of about ``target`` tokens (counted on its own)."""
        if self.synthetic:
            return HEAD_LABEL + random_words(self.rng, target, self.words) + "\n"
        rng = random.Random(f"turn:{self.rng.random()}")

        async def count(text: str) -> int:
            return await self.counter.count(Prompt(text=text))

        return (await _fit_growing(count, lambda n: follow_up(rng, n), target)).text


def _plain(task: Task) -> Task:
    return Task("plain", "", task.passage, "")


async def _fit_growing(count: CountFn, make: Callable[[int], Task], target: int) -> Fitted:
    """Fit ``make(min_chars)``'s task, starting with a passage of ``CHARS_PER_TOKEN`` chars
    per token and doubling it while even the whole passage is too short."""
    chars = max(256, CHARS_PER_TOKEN * target)
    for _ in range(8):
        fitted = await fit_task(count, make(chars), target)
        if fitted is not None:
            return fitted
        chars *= 2
    raise ValueError(f"the corpus has no passage long enough for {target} tokens")


async def single_token_words(counter: Counter, words: tuple[str, ...]) -> tuple[str, ...]:
    """The words that are one token each (with their leading space) on this server: groups
    of 16 counted together, and the words of a group that is longer, one by one."""
    base = await counter.count(Prompt(text=HEAD_LABEL))

    async def extra(ws: tuple[str, ...]) -> int:
        return await counter.count(Prompt(text=HEAD_LABEL + "".join(" " + w for w in ws))) - base

    groups = [words[i : i + 16] for i in range(0, len(words), 16)]
    sizes = await gather_limited(8, [extra(g) for g in groups])
    keep: list[str] = []
    for g, n in zip(groups, sizes, strict=True):
        if n == len(g):
            keep += g
            continue
        singles = await gather_limited(8, [extra((w,)) for w in g])
        keep += [w for w, k in zip(g, singles, strict=True) if k == 1]
    if len(keep) < MIN_SINGLE_WORDS:
        return words  # an odd tokenizer: heads vary in length, the verify step will say so
    return tuple(keep)
