"""Deterministic tokenizer and text for the simulator.

Tokenizer: a text is split into pieces (an optional leading space and up to 4 letters, an
optional space and up to 3 digits, one other character, or a run of whitespace). The same
function counts prompt tokens and builds generated text, so generated text re-tokenizes to exactly
``completion_tokens`` pieces. Token ids are a stable hash of the piece.

Text: a prompt that matches a quality probe (``infmon/quality/probes.jsonl``; also inside a chat
template) is answered with the expected answer, wrong at a per-scenario error rate that is
deterministic in (prompt, seed); other prompts get filler words, deterministic in (prompt, seed).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

PIECE_RE = re.compile(r"\s?[A-Za-z]{1,4}|\s?\d{1,3}|\s?[^\sA-Za-z\d]|\s+")
VOCAB_SIZE = 151_643
PROBES_PATH = Path(__file__).resolve().parent.parent / "quality" / "probes.jsonl"
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "their",
    "can",
    "has",
    "more",
    "when",
    "will",
    "would",
    "so",
    "if",
    "no",
    "out",
    "up",
    "into",
    "do",
    "any",
    "time",
    "than",
    "also",
    "may",
    "its",
    "only",
    "new",
    "some",
    "what",
    "could",
    "two",
    "like",
    "then",
    "such",
    "over",
    "most",
    "made",
    "must",
    "her",
    "long",
    "well",
    "then",
    "each",
    "much",
    "must",
    "make",
    "both",
    "same",
    "good",
    "just",
]
FILLER = tuple(" " + w for w in _WORDS if len(w) <= 4)


def pieces(text: str) -> list[str]:
    return PIECE_RE.findall(text)


def count_tokens(text: str) -> int:
    return len(PIECE_RE.findall(text))


def token_ids(text: str) -> list[int]:
    return [zlib.crc32(p.encode()) % VOCAB_SIZE for p in PIECE_RE.findall(text)]


def stable_u64(*parts: object) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def chat_prompt(messages: list[dict]) -> str:
    """ChatML, as Qwen2.5's template renders it (content strings or text parts)."""
    out = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(f"<|im_start|>{m.get('role', 'user')}\n{content}<|im_end|>\n")
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

    def filler_start(self, prompt: str, seed: int | None) -> int:
        return stable_u64("fill", prompt, self.seed if seed is None else seed) % len(FILLER)


def filler_piece(start: int, i: int) -> str:
    return FILLER[(start + i * 7) % len(FILLER)]
