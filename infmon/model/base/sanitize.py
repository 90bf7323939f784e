"""The one sanitiser for untrusted text: anything a server sent, before any terminal, file or page.

A model id, streamed text, an error body, an HTTP reason phrase, a metric label or a version
string may carry terminal control sequences (ESC/CSI/OSC: set the window title, write the
clipboard through OSC 52, move the cursor), C1 controls that some terminals obey as CSI
(0x9b), bidi overrides that make text read differently from its bytes, or lone surrogates
that make ``print`` raise. ``clean`` turns every such character into a visible escape
(``\\x1b``, ``\\x9b``, ``\\u202e``), so the text is shown as inert data and an operator can
still see that the server sent it. Long strings are cut with a marker saying how much was
left out. Everything printable, including non-ASCII text, passes unchanged (and cheaply:
one regex search on the common path).

``strict_json`` is the one JSON writer for infmon's outputs: NaN and infinities (unknown
values) become ``null`` and ``allow_nan=False`` guarantees the result is valid JSON.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"
"""What a secret (an API key, a password in a URL) is replaced with, everywhere."""
DEFAULT_MAX_CHARS = 300
"""Default length of one untrusted string (a model id, an error message, a label value)."""

_BIDI = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Arabic letter mark, LRM/RLM, the embeddings/overrides (LRE…RLO) and the isolates (LRI…PDI)."""
_OTHER = r"\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff" + _BIDI
"""DEL, the C1 controls, the Unicode line/paragraph separators, lone surrogates, the two
noncharacters XML forbids (U+FFFE, U+FFFF), bidi."""
_UNSAFE = re.compile(r"[\x00-\x1f" + _OTHER + "]")
_UNSAFE_KEEP_NL_TAB = re.compile(r"[\x00-\x08\x0b-\x1f" + _OTHER + "]")
"""As ``_UNSAFE`` but letting ``\\t`` (0x09) and ``\\n`` (0x0a) through (``\\r`` is escaped)."""


_URL_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#@:\s\"'\\<>]*)(:[^/?#@\s\"'\\<>]*)?@"
)
"""The ``user[:password]@`` part of a URL (up to the first ``@`` of its authority)."""


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``<redacted>``
    (``http://alice:PW@host/`` → ``http://alice:<redacted>@host/``; a lone user part may be a
    token: ``http://<redacted>@host/``): it is a secret wherever the URL is shown or stored."""
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(_redacted_userinfo, text)


def _redacted_userinfo(m: re.Match[str]) -> str:
    user = m.group(2) + ":" if m.group(3) else ""
    return f"{m.group(1)}{user}{REDACTED}@"


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` for text from outside (a server, a dataset): JSON nested deeper than
    Python's recursion limit is a ``JSONDecodeError`` like any other bad JSON, never a
    ``RecursionError`` that would end the run with a traceback."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None


def _escape_char(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def clean(
    text: object, max_chars: int | None = DEFAULT_MAX_CHARS, *, multiline: bool = False
) -> str:
    """``text`` (any object, via ``str``) with every control, bidi and surrogate character
    escaped and at most ``max_chars`` characters of it kept (``None``: no limit).

    ``multiline`` lets ``\\n`` and ``\\t`` through (streamed text, a multi-line report block);
    otherwise they are escaped too, so one value stays one line.
    """
    s = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_KEEP_NL_TAB if multiline else _UNSAFE
    cut = max_chars is not None and len(s) > max_chars
    if not cut and pattern.search(s) is None:
        return s
    total = len(s)
    if cut:
        assert max_chars is not None
        s = s[:max_chars]  # each kept character yields at least one: nothing needed is lost
    escaped = pattern.sub(_escape_char, s)
    kept = len(s)
    if max_chars is not None and len(escaped) > max_chars:
        escaped, kept = _fit(s, pattern, max_chars)
    return escaped + f"…[{total - kept:,} more chars]" if kept < total else escaped


def _fit(s: str, pattern: re.Pattern[str], max_chars: int) -> tuple[str, int]:
    """The longest escaped prefix of ``s`` within ``max_chars`` (no escape split), and how many
    characters of ``s`` it holds."""
    out: list[str] = []
    width = 0
    for i, ch in enumerate(s):
        piece = pattern.sub(_escape_char, ch)
        if width + len(piece) > max_chars:
            return "".join(out), i
        out.append(piece)
        width += len(piece)
    return "".join(out), len(s)


def is_clean(text: str, *, multiline: bool = False) -> bool:
    """True when ``text`` holds no character ``clean`` would escape (tests, assertions)."""
    return (_UNSAFE_KEEP_NL_TAB if multiline else _UNSAFE).search(text) is None


def clean_lines(text: object, max_chars: int | None = None) -> str:
    """A block of several lines (newlines and tabs kept, everything else escaped)."""
    return clean(text, max_chars, multiline=True)


def html_text(text: object, *, multiline: bool = False) -> str:
    """Untrusted text for HTML, SVG or XML: sanitised, then ``& < > " '`` escaped (the result is
    always valid XML 1.0 character data)."""
    return html.escape(clean(text, None, multiline=multiline))


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: non-finite floats become ``None`` (unknown), tuples lists,
    mapping keys strings; objects with ``to_dict`` are expanded."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return json_safe(to_dict())
    return str(value)


def strict_json(value: Any, *, indent: int | None = None) -> str:
    """Valid JSON always: unknown numbers are ``null`` (``allow_nan=False`` checks it)."""
    return json.dumps(json_safe(value), indent=indent, allow_nan=False)
