"""What to send: synthetic prompts of about N tokens, or prompts read from a dataset file.

Synthetic prompts are random sequences of short common English words, each a single token
in byte-level BPE vocabularies (GPT-2, Llama, Qwen); a fresh random sequence per request keeps
prefix caching from flattering the numbers. Datasets: JSONL with ``prompt`` (text) or
``messages`` (chat) per line, or ShareGPT JSON (first human turn of each conversation).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infmon.config import Config

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "get",
    "through",
    "back",
    "much",
    "before",
    "go",
    "good",
    "new",
    "write",
    "our",
    "used",
    "me",
    "man",
    "too",
    "any",
    "day",
    "same",
    "right",
    "look",
    "think",
    "also",
    "around",
    "another",
    "came",
    "come",
    "work",
    "three",
    "word",
    "must",
    "because",
    "does",
    "part",
    "even",
    "place",
    "well",
    "such",
    "here",
    "take",
    "why",
    "things",
    "help",
    "put",
    "years",
    "different",
    "away",
    "again",
    "off",
    "went",
    "old",
    "number",
    "great",
    "tell",
    "men",
    "say",
    "small",
    "every",
    "found",
    "still",
    "between",
    "name",
    "should",
    "home",
    "big",
    "give",
    "air",
    "line",
    "set",
    "own",
    "under",
    "read",
    "last",
    "never",
]


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message is one line naming file and line."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: text (completions) or chat messages; either converts to the other."""

    text: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None
    """(role, content) pairs."""

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        return "\n".join(content for _, content in self.messages or ())

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [{"role": role, "content": content} for role, content in self.messages]
        return [{"role": "user", "content": self.text or ""}]


@dataclass(frozen=True, slots=True)
class WorkItem:
    prompt: Prompt
    output_tokens: int


def synthetic_prompt(rng: random.Random, n_tokens: int) -> Prompt:
    """About ``n_tokens`` tokens of random words (one token per word, with its space)."""
    words = rng.choices(_WORDS, k=max(1, n_tokens))
    return Prompt(text=" ".join(words))


class Workload:
    """An endless, seeded source of work items: synthetic or cycling through a dataset."""

    def __init__(
        self,
        *,
        prompt_tokens: int = 128,
        output_tokens: tuple[int, int] = (128, 128),
        prompts: Sequence[Prompt] | None = None,
        seed: int = 0,
    ) -> None:
        if prompts is not None and not prompts:
            raise DatasetError("the dataset holds no prompts")
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self._rng = random.Random(seed)
        self._prompts = list(prompts) if prompts is not None else None
        if self._prompts is not None:
            self._rng.shuffle(self._prompts)
        self._index = 0

    def next(self) -> WorkItem:
        lo, hi = self.output_tokens
        out = lo if lo == hi else self._rng.randint(lo, hi)
        if self._prompts is None:
            return WorkItem(synthetic_prompt(self._rng, self.prompt_tokens), out)
        prompt = self._prompts[self._index % len(self._prompts)]
        self._index += 1
        return WorkItem(prompt, out)


def load_dataset(path: str | Path) -> list[Prompt]:
    """Read a JSONL (``prompt`` / ``messages``) or ShareGPT JSON file of prompts."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset {p}: {exc.__class__.__name__}") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        return _from_sharegpt(data, p)
    return _from_jsonl(text, p)


def _from_jsonl(text: str, path: Path) -> list[Prompt]:
    prompts: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        prompts.append(_prompt_from_obj(obj, f"{path}:{lineno}"))
    if not prompts:
        raise DatasetError(f"{path}: no prompts found")
    return prompts


def _prompt_from_obj(obj: Any, where: str) -> Prompt:
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object with 'prompt' or 'messages'")
    if isinstance(obj.get("prompt"), str):
        return Prompt(text=obj["prompt"])
    messages = obj.get("messages")
    if isinstance(messages, list) and messages:
        pairs = []
        for m in messages:
            if not (isinstance(m, dict) and isinstance(m.get("content"), str)):
                raise DatasetError(f"{where}: each message needs a string 'content'")
            pairs.append((str(m.get("role", "user")), m["content"]))
        return Prompt(messages=tuple(pairs))
    raise DatasetError(f"{where}: expected a string 'prompt' or a non-empty 'messages' list")


def _from_sharegpt(data: Any, path: Path) -> list[Prompt]:
    if not isinstance(data, list):
        raise DatasetError(f"{path}: ShareGPT JSON must be a list of conversations")
    prompts: list[Prompt] = []
    for conv in data:
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            continue
        for turn in turns:
            if (
                isinstance(turn, dict)
                and turn.get("from") in ("human", "user")
                and isinstance(turn.get("value"), str)
                and turn["value"].strip()
            ):
                prompts.append(Prompt(text=turn["value"]))
                break
    if not prompts:
        raise DatasetError(f"{path}: no conversation with a human turn found")
    return prompts


def build_workload(config: Config, seed: int | None = None) -> Workload:
    """The config's prompts, for one load worker (``seed`` overrides the config's, so several
    workers send different prompts): a dataset file when given, else synthetic prompts.
    Raises ``DatasetError`` with a one-line message."""
    prompts = load_dataset(config.dataset) if config.dataset else None
    return Workload(
        prompt_tokens=config.prompt_tokens,
        output_tokens=(config.output_tokens_min, config.output_tokens_max),
        prompts=prompts,
        seed=config.seed if seed is None else seed,
    )
