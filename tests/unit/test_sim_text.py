"""Deterministic tokenizer, probe answers and error rates of the simulator's text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from infmon.sim import tokenizer
from infmon.sim.text import (
    FILLER,
    TextModel,
    chat_prompt,
    count_tokens,
    literal_answer,
    load_probes,
    pieces,
    wrong_answer,
)

PROBES = [
    {
        "id": "a",
        "prompt": "What is 17 + 25? Answer with the number only.",
        "expect": "42",
        "match": "exact",
    },
    {
        "id": "b",
        "prompt": "What is the capital of France? Answer with the city name only.",
        "expect": "Paris",
        "match": "normalised",
    },
    {"id": "c", "prompt": "What is 15% of 200?", "expect": "^30(\\.0+)?$", "match": "regex"},
    {"id": "d", "prompt": "Compact JSON please.", "expect": '{"x":1,"y":2}', "match": "exact"},
]


def write_probes(tmp_path):
    path = tmp_path / "probes.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PROBES) + "\n")
    return load_probes(path)


@given(st.text(max_size=200))
def test_pieces_cover_the_text_and_ids_round_trip(text):
    assert "".join(pieces(text)) == text
    ids = tokenizer.encode(text)
    assert count_tokens(text) == len(ids) >= len(pieces(text))
    assert tokenizer.decode(ids) == text
    assert tokenizer.encode(tokenizer.decode(ids)) == ids
    assert all(0 <= i < tokenizer.VOCAB_SIZE for i in ids)


def test_generated_pieces_retokenize_one_to_one():
    text = "".join(FILLER[(5 + 7 * i) % len(FILLER)] for i in range(300))
    assert count_tokens(text) == 300


def test_probe_answers_also_inside_a_chat_template(tmp_path):
    model = TextModel(write_probes(tmp_path), error_rate=0.0, seed=1)
    assert "".join(model.answer_pieces(PROBES[0]["prompt"], None)) == "42"
    wrapped = chat_prompt(
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": "  What is the capital of France?\nAnswer with the city name only.",
            },
        ]
    )
    assert "".join(model.answer_pieces(wrapped, None)) == "Paris"
    assert "".join(model.answer_pieces(PROBES[2]["prompt"], None)) == "30"
    assert "".join(model.answer_pieces(PROBES[3]["prompt"], None)) == '{"x":1,"y":2}'
    assert model.answer_pieces("Tell me a story.", None) is None


def test_error_rate_is_deterministic_per_prompt_and_seed(tmp_path):
    probes = write_probes(tmp_path)
    model = TextModel(probes, error_rate=0.3, seed=0)
    wrong = 0
    for seed in range(400):
        ans = "".join(model.answer_pieces(PROBES[0]["prompt"], seed))
        assert ans == "".join(model.answer_pieces(PROBES[0]["prompt"], seed))
        wrong += ans != "42"
    assert 0.24 < wrong / 400 < 0.36
    perfect = TextModel(probes, error_rate=0.0, seed=0)
    assert all("".join(perfect.answer_pieces(PROBES[1]["prompt"], s)) == "Paris" for s in range(50))


def test_wrong_answers_differ_and_regex_literals():
    assert wrong_answer("42", 3) != "42"
    assert wrong_answer("Paris", 1).lower() != "paris"
    assert literal_answer("^30(\\.0+)?$", "regex") == "30"
    assert literal_answer("[a-z]+", "regex") is None
