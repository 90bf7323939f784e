"""The simulator's tokenizer: deterministic, invertible, and the one count for every endpoint.

A text is split into pieces (a chat special token; an optional space and a letter followed by up
to two lower-case letters; an optional space and up to 3 digits; an optional space and one other
character; a run of whitespace, leaving its last space to the word after it, as GPT-style
pre-tokenizers do). A piece in the fixed vocabulary is one token; any other piece
(non-ASCII text, odd whitespace runs) falls back to one token per UTF-8 byte, as byte-level BPE
does. So ``detokenize(tokenize(text)) == text`` and ``tokenize(detokenize(ids)) == ids`` for ids
the tokenizer produced; ``/tokenize``, ``usage.prompt_tokens`` and the prefix cache all count
with it. Ids of the chat special tokens are Qwen2's.
"""

from __future__ import annotations

import re
import string

PIECE_RE = re.compile(r"<\|[a-z_]+\|>| ?[A-Za-z][a-z]{0,2}| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+(?!\S)|\s+")
SPECIALS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
VOCAB_SIZE = 151_646  # ids 0 .. 151,645 (the specials last), below the model's vocab_size


def _vocabulary() -> list[str]:
    """Pieces with ids 256.. in a fixed order (ids 0..255 are the UTF-8 bytes)."""
    lower, letters = string.ascii_lowercase, string.ascii_letters
    out: list[str] = []
    for sp in ("", " "):
        for a in letters:
            out.append(sp + a)
            for b in lower:
                out.append(sp + a + b)
                out.extend(sp + a + b + c for c in lower)
        digits = [str(i) for i in range(10)]
        digits += [f"{i:02d}" for i in range(100)] + [f"{i:03d}" for i in range(1000)]
        out.extend(sp + d for d in digits)
        out.extend(sp + c for c in string.punctuation)
    out += [" " * n for n in range(2, 17)] + ["\n" * n for n in range(1, 5)] + ["\t", "\t\t"]
    out += ["\r\n", " \n", "\n "]
    return out


_PIECES = _vocabulary()
ID_OF: dict[str, int] = {p: i + 256 for i, p in enumerate(_PIECES)}
ID_OF.update(SPECIALS)
PIECE_OF: dict[int, str] = {i: p for p, i in ID_OF.items()}
assert len(_PIECES) + 256 <= min(SPECIALS.values())


def pieces(text: str) -> list[str]:
    return PIECE_RE.findall(text)


def _bytes(piece: str) -> bytes:
    return piece.encode("utf-8", "surrogatepass")


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    get = ID_OF.get
    out: list[int] = []
    for p in PIECE_RE.findall(text):
        i = get(p)
        if i is None:
            out.extend(_bytes(p))
        else:
            out.append(i)
    return out


def count(text: str) -> int:
    return len(encode(text))


def decode(ids: list[int]) -> str:
    """Text of token ids; raises ValueError for an id outside the vocabulary."""
    parts: list[str] = []
    pending = bytearray()
    for i in ids:
        if 0 <= i < 256:
            pending.append(i)
            continue
        if pending:
            parts.append(pending.decode("utf-8", "surrogatepass" if _valid(pending) else "replace"))
            pending.clear()
        piece = PIECE_OF.get(i)
        if piece is None:
            raise ValueError(f"token id {i} is out of vocabulary")
        parts.append(piece)
    if pending:
        parts.append(pending.decode("utf-8", "surrogatepass" if _valid(pending) else "replace"))
    return "".join(parts)


def _valid(data: bytearray) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


def is_single_token(piece: str) -> bool:
    return piece in ID_OF
