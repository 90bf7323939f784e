"""Deterministic text for the simulator: what the model answers.

A prompt that matches a quality probe (``infmon/quality/probes.jsonl``; also inside a chat
template) is answered with the expected answer, wrong at a per-scenario error rate that is
deterministic in (prompt, seed). Other prompts get a continuation that depends on the prompt, as
a model's answer to "summarise / explain / edit this" does: runs of the prompt's own tokens
(starting at a word, about 12 tokens long) between common filler words, deterministic in
(prompt, seed). So an n-gram drafter finds more of natural text than of random words, as vLLM's
prompt lookup does. How often the answer quotes the prompt follows how much the prompt repeats
itself (the share of its tokens that a 2-5-gram lookup over its own earlier tokens predicts, on
the last 512 tokens): a model quotes documentation and code it is asked about, and not a list of
random words (self-repetition 0.22 vs 0.03 on the fidelity bench's prompts). Every output piece is one token of the simulator's tokenizer
(``infmon.sim.tokenizer``), so generated text re-tokenizes to ``completion_tokens`` tokens.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from infmon.sim import tokenizer
from infmon.sim.spec import NgramIndex

VOCAB_SIZE = tokenizer.VOCAB_SIZE
PROBES_PATH = Path(__file__).resolve().parent.parent / "quality" / "probes.jsonl"
_WORDS = (
    "the of and to in is for it as was be by on not he are or his at but an you her she one all "
    "we can has if no out up do any may its new two had how who now our day get use man way see "
    "him old off own say too set put end why let big few"
)
FILLER = tuple(" " + w for w in _WORDS.split())
QUOTE_PER_REPETITION = 3.0  # share of the answer quoted = this x self-repetition (<= 0.9)
COPY_MEAN = 12  # mean length of a copied run, tokens
SELF_WINDOW = 512


def pieces(text: str) -> list[str]:
    return tokenizer.pieces(text)


def count_tokens(text: str) -> int:
    return tokenizer.count(text)


def token_ids(text: str) -> list[int]:
    return tokenizer.encode(text)


def stable_u64(*parts: object) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def chat_prompt(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """ChatML, as Qwen2.5's template renders it (content strings or text parts)."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append(f"<|im_start|>{m.get('role', 'user')}\n{content}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Probe:
    id: str
    prompt: str
    answer: str  # a literal answer that satisfies the probe's expectation


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def literal_answer(expect: str, match: str) -> str | None:
    """The answer text for a probe; for a regex, a literal derived from it (None if none fits)."""
    if match != "regex":
        return expect
    lit = re.sub(r"\((?:[^()\\]|\\.)*\)[?*]", "", expect)
    lit = lit.strip("^$")
    lit = re.sub(r"\\(.)", r"\1", lit)
    try:
        return lit if re.fullmatch(expect, lit) else None
    except re.error:
        return None


def load_probes(path: Path = PROBES_PATH) -> dict[str, Probe]:
    """Probes keyed by normalised prompt; a missing file means no probes."""
    probes: dict[str, Probe] = {}
    if not path.exists():
        return probes
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        answer = literal_answer(str(row["expect"]), row.get("match", "exact"))
        if answer is not None:
            probes[_norm(row["prompt"])] = Probe(str(row.get("id", "")), row["prompt"], answer)
    return probes


def wrong_answer(answer: str, salt: int) -> str:
    """A plausible wrong answer: a changed digit, or a changed letter."""
    chars = list(answer)
    digits = [i for i, c in enumerate(chars) if c.isdigit()]
    if digits:
        i = digits[salt % len(digits)]
        chars[i] = str((int(chars[i]) + 1 + salt % 8) % 10)
        return "".join(chars)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    if letters:
        i = letters[salt % len(letters)]
        chars[i] = "x" if chars[i].lower() != "x" else "q"
        return "".join(chars)
    return answer + "?"


class TextModel:
    """Chooses the generated pieces for a request."""

    def __init__(self, probes: dict[str, Probe], error_rate: float, seed: int) -> None:
        self.probes = probes
        self.error_rate = error_rate
        self.seed = seed

    def find_probe(self, prompt: str) -> Probe | None:
        key = _norm(prompt)
        probe = self.probes.get(key)
        if probe is not None:
            return probe
        for pkey, p in self.probes.items():
            if pkey in key:
                return p
        return None

    def answer_pieces(self, prompt: str, seed: int | None) -> list[str] | None:
        """The answer of a probe prompt as pieces (ending the text), or None."""
        probe = self.find_probe(prompt)
        if probe is None:
            return None
        u = stable_u64(_norm(probe.prompt), self.seed if seed is None else seed)
        answer = probe.answer
        if (u % 1_000_000) / 1_000_000 < self.error_rate:
            answer = wrong_answer(answer, u >> 20)
        return pieces(answer)

    def natural_length(self, prompt: str, seed: int | None) -> int:
        """Tokens a non-probe answer runs before EOS: deterministic, 64..1087."""
        return 64 + stable_u64("len", prompt, self.seed if seed is None else seed) % 1024

    def continuation(self, prompt: str, seed: int | None) -> Continuation:
        salt = stable_u64("cont", prompt, self.seed if seed is None else seed)
        return Continuation(pieces(prompt), salt)


def self_repetition(ids: list[int]) -> float:
    """Share of tokens a 2-5-gram lookup over the earlier tokens predicts (last 512 tokens)."""
    ids = ids[-SELF_WINDOW:]
    if len(ids) < 3:
        return 0.0
    index, hits = NgramIndex([], 2, 5), 0
    for t in ids:
        proposal = index.propose(1)
        hits += bool(proposal) and proposal[0] == t
        index.append(t)
    return hits / len(ids)


def _starts_word(piece: str) -> bool:
    return len(piece) >= 2 and piece[0] == " " and piece[1].isalpha() and piece.isascii()


@dataclass(slots=True)
class Continuation:
    """The output after any probe answer: prompt runs and filler, one token per piece, lazily."""

    prompt: list[str]
    seed: int
    out: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    _starts: list[int] = field(default_factory=list)
    _rng: random.Random = field(default_factory=random.Random)
    _pos: int = -1  # next prompt piece of the run being copied; -1: none
    _quote: float = -1.0  # chance a copied run starts after a filler token (on first use)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _start(self) -> None:
        self._starts = [i for i, p in enumerate(self.prompt) if _starts_word(p)]
        ids = [tokenizer.ID_OF.get(p, -1) for p in self.prompt[-SELF_WINDOW:]]
        share = min(0.9, QUOTE_PER_REPETITION * self_repetition(ids))
        self._quote = share / (COPY_MEAN * (1.0 - share))  # per filler token: runs start

    def _copyable(self, i: int) -> bool:
        return (
            i < len(self.prompt)
            and tokenizer.is_single_token(self.prompt[i])
            and (not self.prompt[i].isspace() and not self.prompt[i].startswith("<|"))
        )

    def _next(self) -> str:
        if self._quote < 0:
            self._start()
        rng = self._rng
        if self._pos >= 0 and self._copyable(self._pos) and rng.random() > 1 / COPY_MEAN:
            self._pos += 1
            return self.prompt[self._pos - 1]
        self._pos = -1
        if self._starts and rng.random() < self._quote:
            self._pos = self._starts[rng.randrange(len(self._starts))] + 1
            return self.prompt[self._pos - 1]
        return FILLER[rng.randrange(len(FILLER))]

    def piece(self, i: int) -> str:
        while len(self.out) <= i:
            p = self._next()
            self.out.append(p)
            self.ids.append(tokenizer.ID_OF[p])
        return self.out[i]

    def token_id(self, i: int) -> int:
        self.piece(i)
        return self.ids[i]
