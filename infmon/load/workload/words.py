"""Random common words: the worst case for prefix caches and speculative decoding.

Each word, with its leading space, is a single token in the byte-level BPE vocabularies of
GPT-2, Llama and Qwen; ``infmon.load.tokenize`` checks which ones are on the server at hand,
so a run of N of them is N tokens exactly there.
"""

from __future__ import annotations

import random

from infmon.load.workload.items import Prompt, WorkItem

RANDOM_WORDS = "random-words"
"""The task kind of a prompt of random words."""

_TEXT = """the of and to in is was for on are as with his they at be this from have or by one
had not but what all were when we there can an your which their said if do will each
about how up out them then she many some so these would other into has more her two
like him see time could no make than first been its who now people my made over did
down only way find use may water long little very after words called just where most
know get through back much before go good new write our used me man too any day same
right look think also around another came come work three word must because does part
even place well such here take why things help put years different away again off went
old number great tell men say small every found still between name should home big
give air line set own under read last never"""
WORDS: tuple[str, ...] = tuple(_TEXT.split())


def random_words(rng: random.Random, n: int, vocabulary: tuple[str, ...] = WORDS) -> str:
    """``n`` words, each with its leading space (so each is its own token)."""
    return "".join(" " + w for w in rng.choices(vocabulary, k=max(0, n)))


class RandomWords:
    """An unsized work source: ``prompt_tokens`` random words per prompt, no server calls.

    For benchmarks of the client and tests with scripted servers; a real run sizes prompts
    with the server's tokenizer (``infmon.load.feed``)."""

    keep_text = False

    def __init__(
        self,
        prompt_tokens: int = 128,
        output_tokens: tuple[int, int] = (128, 128),
        seed: int = 0,
    ) -> None:
        self.prompt_tokens, self.output_tokens = prompt_tokens, output_tokens
        self._rng = random.Random(seed)

    def next(self) -> WorkItem:
        lo, hi = self.output_tokens
        out = lo if lo == hi else self._rng.randint(lo, hi)
        text = random_words(self._rng, max(1, self.prompt_tokens)).lstrip()
        return WorkItem(Prompt(text=text), out, task=RANDOM_WORDS)

    async def next_item(self, slot: int | None) -> WorkItem:
        return self.next()

    def finished(self, item: WorkItem, rec: object) -> None:
        return None
