"""The n-gram drafter looks up the real context, so natural text drafts better than random words."""

from __future__ import annotations

import random

from infmon.sim.analysis import ngram_acceptance
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sim.spec import NgramIndex
from infmon.sim.text import FILLER, TextModel, count_tokens, self_repetition, token_ids

COMMON = [
    "time",
    "person",
    "year",
    "way",
    "day",
    "thing",
    "man",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "eye",
    "woman",
    "place",
    "work",
    "week",
    "case",
    "point",
    "government",
    "company",
    "number",
    "group",
    "problem",
    "fact",
]


def natural_prompts(n: int = 30) -> list[str]:
    from pydoc_data.topics import topics

    texts = [t for _, t in sorted(topics.items()) if len(t) >= 600][:n]
    return ["Summarise this passage:\n\n" + t[:2400] for t in texts]


def random_prompts(n: int = 30, words: int = 400) -> list[str]:
    rng = random.Random(0)
    return [
        " ".join(rng.choice(COMMON + [w.strip() for w in FILLER]) for _ in range(words))
        for _ in range(n)
    ]


def test_ngram_index_proposes_what_followed_the_latest_earlier_copy():
    idx = NgramIndex([1, 2, 3, 4, 9, 1, 2, 3], 2, 3)
    assert idx.propose(2) == [4, 9]  # "1 2 3" was followed by 4 9
    idx.append(7)
    assert idx.propose(2) == []  # "2 3 7" / "3 7" never seen before
    assert NgramIndex([5, 6], 2, 3).propose(3) == []


def test_natural_text_gets_higher_ngram_acceptance_than_random_words():
    cfg = build_config(SCENARIOS["baseline"], speculative_k=4, spec_method="ngram")
    nat_rate, nat_len = ngram_acceptance(cfg, natural_prompts())
    rnd_rate, rnd_len = ngram_acceptance(cfg, random_prompts())
    print(
        f"\nn-gram k=4 acceptance: pydoc_data.topics {nat_rate:.3f} (length {nat_len:.2f}), "
        f"random common words {rnd_rate:.3f} (length {rnd_len:.2f})"
    )
    assert nat_rate > rnd_rate + 0.1
    assert nat_len > rnd_len


def test_the_answer_depends_on_the_prompt_and_retokenizes_one_to_one():
    model = TextModel({}, 0.0, 0)
    a = model.continuation(natural_prompts(1)[0], None)
    b = model.continuation(random_prompts(1)[0], None)
    text_a = "".join(a.piece(i) for i in range(300))
    text_b = "".join(b.piece(i) for i in range(300))
    assert text_a != text_b
    assert count_tokens(text_a) == 300 and count_tokens(text_b) == 300
    assert [a.token_id(i) for i in range(300)] == token_ids(text_a)
    assert self_repetition(token_ids(natural_prompts(1)[0])) > 3 * self_repetition(
        token_ids(random_prompts(1)[0])
    )
