"""The one sanitiser: every control, escape and bidi character comes out visible and inert."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.model.base.sanitize import (
    clean,
    clean_lines,
    html_text,
    is_clean,
    json_safe,
    strict_json,
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC 0
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52
        ("\x1b[2J\x1b[31m", "\\x1b[2J\\x1b[31m"),  # CSI
        ("\x9b31m", "\\x9b31m"),  # 8-bit CSI (C1)
        ("\x85\x90\x9f", "\\x85\\x90\\x9f"),
        ("a\x00b\x7fc", "a\\x00b\\x7fc"),  # NUL, DEL
        ("\u202eevil\u202c", "\\u202eevil\\u202c"),  # RLO … PDF
        ("\u2066x\u2069\u200f\u061c", "\\u2066x\\u2069\\u200f\\u061c"),  # isolates, RLM, ALM
        ("\ud800", "\\ud800"),  # a lone surrogate (print would raise)
        ("line\u2028sep", "line\\u2028sep"),
        ("a\nb\tc\rd", "a\\x0ab\\x09c\\x0dd"),  # one line unless multiline
    ],
)
def test_every_kind_is_escaped(raw: str, shown: str) -> None:
    assert clean(raw) == shown
    assert is_clean(clean(raw))


def test_printable_text_passes_unchanged() -> None:
    for text in ("Qwen/Qwen2.5-7B-Instruct", "日本語 — ünïcode ✓ 🚀", "[bold]x[/] <script>"):
        assert clean(text) == text


def test_multiline_keeps_newlines_and_tabs_only() -> None:
    assert clean_lines("a\nb\tc\x1b[0m\rd") == "a\nb\tc\\x1b[0m\\x0dd"


def test_long_text_is_cut_with_a_marker_counting_what_was_left_out() -> None:
    out = clean("x" * 1000, 100)
    assert out == "x" * 100 + "…[900 more chars]"
    out = clean("\x1b" * 100, 20)  # escapes are not split: 5 × "\x1b" = 20 characters
    assert out == "\\x1b" * 5 + "…[95 more chars]"
    assert clean("short", None) == "short" and len(clean("y" * 10**6, None)) == 10**6


def test_html_text_is_valid_xml_character_data() -> None:
    raw = "<b>&'\"\x00\x1b\x0b\ufffe\uffff\ud800</b>"
    ET.fromstring(f"<t>{html_text(raw)}</t>")
    assert "<b>" not in html_text(raw)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60))
def test_any_text_comes_out_clean_and_xml_safe(raw: str) -> None:
    out = clean(raw, 40)
    assert is_clean(out)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)
    ET.fromstring(f"<t>{html_text(raw)}</t>")
    multi = clean_lines(raw)
    assert is_clean(multi, multiline=True)


def test_strict_json_turns_unknown_into_null() -> None:
    doc = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (1, 2), "d": {3: None}}
    assert json.loads(strict_json(doc)) == {
        "a": None,
        "b": [None, None, 1.5],
        "c": [1, 2],
        "d": {"3": None},
    }
    assert json_safe(10**400) == 10**400  # big integers are valid JSON; only NaN/Inf are not


def test_redact_url_hides_a_password_and_never_spans_json_fields() -> None:
    import json

    from infmon.model.base.sanitize import redact_url

    assert redact_url("http://alice:PW@h:8/v1") == "http://alice:<redacted>@h:8/v1"
    assert redact_url("see https://tok@h/x?q=a@b") == "see https://<redacted>@h/x?q=a@b"
    assert redact_url("http://h/p@x and a@b") == "http://h/p@x and a@b"
    doc = json.dumps({"u": "http://host", "e": "a@b", "v": "http://u:pw@h"})
    assert json.loads(redact_url(doc)) == {
        "u": "http://host",
        "e": "a@b",
        "v": "http://u:<redacted>@h",
    }
