"""Random-word prompts and dataset loaders (JSONL prompt/messages, ShareGPT JSON)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.load.workload import DatasetError, Prompt, load_dataset
from infmon.load.workload.words import RandomWords as Workload


def test_synthetic_prompts_have_n_words_and_are_seeded() -> None:
    a = [Workload(prompt_tokens=50, output_tokens=(10, 20), seed=3).next() for _ in range(1)]
    w1, w2 = (
        Workload(prompt_tokens=50, output_tokens=(10, 20), seed=3),
        Workload(prompt_tokens=50, output_tokens=(10, 20), seed=3),
    )
    items1 = [w1.next() for _ in range(20)]
    assert items1 == [w2.next() for _ in range(20)]
    assert all(len(i.prompt.as_text().split()) == 50 for i in items1)
    assert all(10 <= i.output_tokens <= 20 for i in items1)
    assert len({i.prompt.text for i in items1}) == 20  # fresh prompts: no accidental prefix hits
    assert a[0] == items1[0]


def test_jsonl_with_prompt_and_messages(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text(
        json.dumps({"prompt": "hello"})
        + "\n\n"
        + json.dumps(
            {
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                ]
            }
        )
        + "\n"
    )
    ps = load_dataset(f)
    assert ps[0] == Prompt(text="hello")
    assert ps[1].as_messages()[0] == {"role": "system", "content": "be brief"}
    assert ps[1].as_text() == "be brief\nhi"
    assert ps[0].as_messages() == [{"role": "user", "content": "hello"}]


def test_sharegpt_takes_the_first_human_turn(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "q1"},
                        {"from": "gpt", "value": "a1"},
                    ]
                },
                {"conversations": [{"from": "gpt", "value": "only gpt"}]},
                {"id": "no conversations"},
                {
                    "conversations": [
                        {"from": "system", "value": "s"},
                        {"from": "human", "value": "q2"},
                    ]
                },
            ]
        )
    )
    assert [p.text for p in load_dataset(f)] == ["q1", "q2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json\n", ":1: not valid JSON"),
        ('{"text": "x"}\n', ":1: expected a string 'prompt'"),
        ("[1, 2]", "no conversation"),
        ("", "no prompts"),
        ("[oops", "not valid JSON"),
        ('{"messages": [{"role": "user"}]}\n', "string 'content'"),
    ],
)
def test_bad_datasets_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(f)
    assert "\n" not in str(info.value)


def test_missing_dataset_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read dataset"):
        load_dataset(tmp_path / "nope.jsonl")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_fuzzed_datasets_raise_only_dataset_errors(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.jsonl"
        f.write_text(text, encoding="utf-8")
        with contextlib.suppress(DatasetError):
            load_dataset(f)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["prompt", "messages", "role", "content", "conversations", "from", "value"]
                ),
                c,
                max_size=3,
            )
        ),
    )
)
def test_fuzzed_json_structures_raise_only_dataset_errors(obj: object) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, text in (("a.json", json.dumps([obj])), ("b.jsonl", json.dumps(obj) + "\n")):
            f = Path(d) / name
            f.write_text(text)
            with contextlib.suppress(DatasetError):
                load_dataset(f)
