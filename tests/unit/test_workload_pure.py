"""The pure workload package: every length distribution, traces, schedules, conversations."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest

from infmon.load.workload.conversation import start
from infmon.load.workload.corpus import KINDS, code_documents, make_task, prose_documents
from infmon.load.workload.traces import TraceError, parse_trace
from infmon.model.shape.lengths import JITTER, LengthError, fixed, parse_lengths
from infmon.model.shape.schedule import ScheduleError, parse_schedule

N = 20_000


def draws(spec: str, seed: int = 1) -> list[int]:
    d, rng = parse_lengths(spec), random.Random(seed)
    return [d.draw(rng) for _ in range(N)]


def test_fixed_length_is_exact_and_its_jitter_is_ten_percent() -> None:
    assert set(draws("128")) == {128}
    j, rng = fixed(128).jittered(), random.Random(2)
    got = [j.draw(rng) for _ in range(2000)]
    spread = round(128 * JITTER)
    assert min(got) == 128 - spread and max(got) == 128 + spread
    assert abs(statistics.mean(got) - 128) < 1.5
    assert fixed(5).jittered() == fixed(5)  # ±0.5 rounds to nothing: stays fixed


def test_uniform_range_covers_both_ends_evenly() -> None:
    got = draws("100-200")
    assert min(got) == 100 and max(got) == 200
    assert abs(statistics.mean(got) - 150) < 1.5
    assert parse_lengths("100-200").mean == 150


def test_normal_has_its_mean_and_sd_and_never_goes_below_one() -> None:
    got = draws("normal:512,64")
    assert abs(statistics.mean(got) - 512) < 2.5
    assert abs(statistics.pstdev(got) - 64) < 2.5
    assert min(draws("normal:5,50")) >= 1


def test_lognormal_has_its_median_and_sigma() -> None:
    got = draws("lognormal:300,0.5")
    assert abs(statistics.median(got) - 300) < 6
    logs = [math.log(x) for x in got]
    assert abs(statistics.pstdev(logs) - 0.5) < 0.02
    assert abs(parse_lengths("lognormal:300,0.5").mean - 300 * math.exp(0.125)) < 1e-9


def test_empirical_draws_only_the_file_values_with_equal_weight(tmp_path: Path) -> None:
    f = tmp_path / "lens.txt"
    f.write_text("# prompt lengths\n10\n20\n\n20  # twice\n40\n")
    got = draws(f"empirical:{f}")
    assert set(got) == {10, 20, 40}
    assert abs(got.count(20) / N - 0.5) < 0.02
    j = tmp_path / "lens.json"
    j.write_text(json.dumps([7, 9]))
    assert set(draws(f"empirical:{j}")) == {7, 9}


@pytest.mark.parametrize(
    "spec",
    ["0", "-3", "9-3", "normal:5", "normal:x,1", "lognormal:100,9", "empirical:/nonexistent", "x"],
)
def test_bad_length_specs_are_one_line_errors(spec: str) -> None:
    with pytest.raises(LengthError) as info:
        parse_lengths(spec)
    assert "\n" not in str(info.value)


def test_empirical_refuses_a_device_file() -> None:
    with pytest.raises(LengthError):
        parse_lengths("empirical:/dev/zero")


def test_conversation_turns_carry_the_answers_in_order() -> None:
    c = start(7, 3, "system text\n\n").ask("first?")
    assert c.awaiting_answer and c.sent == 1
    with pytest.raises(ValueError):
        c.ask("too early")  # turn 2 cannot be asked before turn 1 has its answer
    c = c.answer(" answer one").ask("second?")
    assert c.prompt(chat=True).messages == (
        ("system", "system text\n\n"),
        ("user", "first?"),
        ("assistant", " answer one"),
        ("user", "second?"),
    )
    assert c.prompt(chat=False).text == "system text\n\nfirst? answer one\n\nsecond?"
    c = c.answer(" two").ask("third?").answer(" three")
    assert c.done
    with pytest.raises(ValueError):
        c.ask("fourth")


def test_corpus_is_real_text_and_tasks_of_every_kind() -> None:
    assert len(prose_documents()) > 20 and len(code_documents()) > 5
    rng = random.Random(3)
    kinds = {make_task(rng, 2000).kind for _ in range(200)}
    assert kinds == set(KINDS)
    task = make_task(random.Random(4), 5000, "explain-code")
    assert len(task.passage) >= 5000 and "def " in task.passage
    assert make_task(random.Random(4), 5000) == make_task(random.Random(4), 5000)  # seeded


def mooncake_lines() -> str:
    rows = [
        {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]},
        {"timestamp": 0, "input_length": 6472, "output_length": 26, "hash_ids": [0, 1, 2]},
        {"timestamp": 30535, "input_length": 6472, "output_length": 24, "hash_ids": [0, 1, 9]},
    ]
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def test_mooncake_trace_is_sorted_in_seconds_with_its_blocks() -> None:
    t = parse_trace(mooncake_lines(), "m.jsonl")
    assert t.format == "mooncake" and t.name == "m.jsonl"
    assert [e.at_s for e in t.entries] == [0.0, 27.482, 30.535]
    assert t.entries[0].hash_ids == (0, 1, 2) and t.entries[0].output_tokens == 26
    assert t.block_tokens == 512


def test_azure_and_burstgpt_traces() -> None:
    azure = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    t = parse_trace(azure, "azure.csv")
    assert t.format == "azure"
    assert abs(t.entries[1].at_s - 4.314579) < 1e-5
    assert (t.entries[0].input_tokens, t.entries[0].output_tokens) == (374, 44)
    burst = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7,ChatGPT,1000,0,1000,Conversation log\n"
        "9,GPT-4,1087,390,1477,API log\n"
    )
    b = parse_trace(burst, "burst.csv")
    assert b.format == "burstgpt" and len(b.entries) == 2  # the failed (0-token) row skipped
    assert [e.at_s for e in b.entries] == [0.0, 4.0]


@pytest.mark.parametrize(
    "text", ["a,b\n1,2\n", '{"timestamp": "x", "input_length": 1}\n', "{not json\n", ""]
)
def test_bad_traces_are_one_line_errors(text: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_trace(text, "t")
    assert "\n" not in str(info.value)


def test_ramp_schedule_rises_linearly() -> None:
    s = parse_schedule("ramp:1-20/60s")
    assert len(s.times_s) == round((1 + 20) / 2 * 60)
    first_10s = sum(1 for t in s.times_s if t < 10)
    last_10s = sum(1 for t in s.times_s if t >= 50)
    assert 10 <= first_10s <= 30 and 170 <= last_10s <= 200
    assert list(s.times_s) == sorted(s.times_s)


def test_burst_and_joined_parts() -> None:
    s = parse_schedule("rate:2/5s+burst:50@10s")
    assert s.times_s.count(15.0) == 50
    assert len(s.times_s) == 60 and s.times_s[0] == 0.5
    with pytest.raises(ScheduleError):
        parse_schedule("ramp:0-0/10s")
    with pytest.raises(ScheduleError):
        parse_schedule("burst:5")


def test_process_start_time_is_read_from_a_real_page_and_garbage_is_none() -> None:
    from infmon.load.build import process_start_time
    from tests.conftest import FIXTURES

    page = (FIXTURES / "metrics" / "vllm-v1-0.32-cpu-tiny-gpt2.prom").read_bytes()
    assert process_start_time(page) is not None and process_start_time(page) > 1.5e9
    assert process_start_time(b"process_start_time_seconds NaN\n") is None
    assert process_start_time(b'process_start_time_seconds{a="\x1b]52"} x\n') is None
    assert process_start_time(b"vllm:num_requests_running 1\n") is None
