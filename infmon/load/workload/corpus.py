"""The built-in corpus: real text that every machine with Python has, made into real tasks.

Prose comes from ``pydoc_data.topics`` (the language reference behind ``help()``), code from
a fixed list of standard-library modules. Each task is of a kind real traffic has: summarise a
passage, answer a question about it, explain or edit code, continue a conversation. A task is
an instruction, a passage and a closing line; the passage is what gets cut to size (by
``infmon.load.tokenize`` with the server's own tokenizer). Different Python versions ship
different text, so the same seed gives the same prompts on the same machine, not everywhere.
"""

from __future__ import annotations

import importlib.util
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CODE_MODULES = (
    "textwrap",
    "bisect",
    "heapq",
    "fractions",
    "statistics",
    "calendar",
    "colorsys",
    "difflib",
    "shlex",
    "functools",
    "dataclasses",
    "json.decoder",
    "json.encoder",
    "csv",
    "ipaddress",
    "pprint",
    "queue",
    "sched",
    "string",
    "graphlib",
)
"""Standard-library modules whose source is the code corpus (stable, present everywhere)."""
MAX_SOURCE_BYTES = 400_000
"""A module source larger than this is cut (the corpus stays bounded in memory)."""

KINDS = ("summarise", "question", "explain-code", "edit-code", "conversation")


@dataclass(frozen=True, slots=True)
class Document:
    """One corpus text: a reference topic or a module's source."""

    title: str
    text: str
    code: bool


@dataclass(frozen=True, slots=True)
class Task:
    """A prompt in three parts; ``passage`` is cut to fit the requested length."""

    kind: str
    instruction: str
    passage: str
    closing: str

    def render(self, cut: int | None = None) -> str:
        body = self.passage if cut is None else self.passage[:cut]
        return f"{self.instruction}{body}{self.closing}"


@lru_cache(maxsize=1)
def prose_documents() -> tuple[Document, ...]:
    """The language reference topics, in a stable order."""
    from pydoc_data.topics import topics

    docs = []
    for title in sorted(topics):
        text = _tidy(topics[title])
        if len(text) > 200:
            docs.append(Document(title, text, code=False))
    return tuple(docs)


@lru_cache(maxsize=1)
def code_documents() -> tuple[Document, ...]:
    """Sources of ``CODE_MODULES`` that this Python has (read once, bounded)."""
    docs = []
    for name in CODE_MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        try:
            raw = Path(origin).read_bytes()[:MAX_SOURCE_BYTES]
        except OSError:
            continue
        text = _tidy(raw.decode("utf-8", "replace"))
        docs.append(Document(name, text, code=True))
    return tuple(docs)


def _tidy(text: str) -> str:
    """Plain ASCII-friendly text: no tabs, no trailing spaces, no runs of blank lines."""
    text = text.replace("\t", "    ").replace("\r\n", "\n")
    text = re.sub(r"[ ]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _window(rng: random.Random, docs: tuple[Document, ...], min_chars: int) -> tuple[str, str]:
    """(title, text): from a random paragraph start, continuing into the next documents
    until at least ``min_chars`` characters are there."""
    i = rng.randrange(len(docs))
    first = docs[i]
    starts = [0] + [m.end() for m in re.finditer(r"\n\n", first.text)]
    start = rng.choice(starts[: max(1, len(starts) - 1)])
    parts, size = [first.text[start:]], len(first.text) - start
    j = i
    while size < min_chars:
        j = (j + 1) % len(docs)
        if j == i and size > 0 and len(parts) > len(docs):
            break
        parts.append(docs[j].text)
        size += len(docs[j].text) + 2
    return first.title, "\n\n".join(parts)


def make_task(rng: random.Random, min_chars: int, kind: str | None = None) -> Task:
    """A random task whose passage has at least ``min_chars`` characters (cut later)."""
    kind = kind or rng.choice(KINDS)
    if kind in ("explain-code", "edit-code") and code_documents():
        title, code = _window(rng, code_documents(), min_chars)
        if kind == "explain-code":
            head = f"Explain what this code from Python's {title} module does, step by step.\n\n"
            return Task(kind, head + "```python\n", code, "\n```\n")
        head = (
            f"Rewrite this code from Python's {title} module with type hints and shorter "
            "functions; keep its behaviour and say what you changed.\n\n```python\n"
        )
        return Task(kind, head, code, "\n```\n")
    title, text = _window(rng, prose_documents(), min_chars)
    if kind == "question":
        head = "Read the passage from the Python language reference, then answer the question.\n\n"
        return Task(kind, head, text, f"\n\nQuestion: what does the passage say about {title}?\n")
    if kind == "conversation":
        head = (
            "Continue this conversation between a user and an assistant.\n\n"
            f"User: I am reading the Python reference on {title}. Can you walk me through it?\n"
            "Assistant: Of course. Here is the part that matters:\n\n"
        )
        return Task(kind, head, text, "\nUser: thanks, and what should I watch out for?\n")
    head = "Summarise the following passage from the Python language reference.\n\n"
    return Task("summarise", head, text, "\n\nSummary:")


FOLLOW_UPS = (
    "Can you give a short example?",
    "Now say it again in three bullet points.",
    "What is the most common mistake here?",
    "How would you test that?",
    "Compare that with the passage below.",
)
"""The start of each later user turn in a multi-turn conversation."""


def follow_up(rng: random.Random, min_chars: int) -> Task:
    """A later user turn: a short question, then a passage cut to the turn's length."""
    title, text = _window(rng, prose_documents(), min_chars)
    return Task("follow-up", f"{rng.choice(FOLLOW_UPS)} ({title})\n\n", text, "\n")


def system_prompt(group: int, rng: random.Random, min_chars: int) -> Task:
    """A shared system prompt (one per prefix group): a role and reference material."""
    _, text = _window(rng, prose_documents(), min_chars)
    head = (
        f"You are assistant #{group} of a Python help desk. Answer precisely and cite the "
        "reference below when it applies.\n\nReference:\n"
    )
    return Task("system", head, text, "\n\n")
