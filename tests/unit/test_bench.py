"""bench's parts: the step runner on the load engine (in process, a scripted client), the row
format within 100 columns, and the exit verdict."""

from __future__ import annotations

import json
import time

import pytest

from infmon.cli import main
from infmon.clock import MonotonicClock
from infmon.commands import CliError
from infmon.commands.bench_out import verdict
from infmon.commands.bench_table import header, row
from infmon.commands.trials_out import write_trials
from infmon.config import Config
from infmon.engine.controller import LoadEngine
from infmon.engine.runner import EdgeRate, StepRunner, StepSpec
from infmon.model.base.loghist import LogHistogram
from infmon.model.records.figures import summarize
from infmon.model.records.measures import SLO
from infmon.model.records.request import RequestRecord
from infmon.model.steps.ledger import StepLedger
from tests.enginekit import random_words, scripted


def stats(c: int, ok: int, failed: int = 0):
    recs = [
        RequestRecord(
            request_id=i, sent_s=0.0, chunk_times_s=(0.1, 0.2), end_s=0.2, output_tokens=2
        )
        for i in range(ok)
    ]
    recs += [RequestRecord(request_id=99, sent_s=0.0, end_s=0.1, error_kind="reset")] * failed
    return summarize(recs, 1.0, concurrency=c, achieved_concurrency=float(c))


async def run_plan(plan, runner_kw=None, on_tick=None, **client):
    clock = MonotonicClock()
    ledger = StepLedger(SLO(e2el_s=1.0), min_hold_s=0.0, min_requests=1)
    records, events = [], []

    def on_records(batch):
        records.extend(batch.records)
        for r in batch.records:
            ledger.add_record(r)

    def on_window(w):  # as bench's wiring: the loop's lag too (its self-check)
        lag = LogHistogram.from_sparse(w.lag) if w.lag is not None else None
        ledger.add_window(w.t0, w.t1, w.tokens, w.inflight_area_s, lag)

    engine = LoadEngine(
        Config(url="http://scripted"),
        clock,
        on_records=on_records,
        on_window=on_window,
        client_factory=scripted(**client),
        workload_factory=random_words(),
    )
    await engine.start()
    runner = StepRunner(
        engine, ledger, clock, on_events=events.extend, tick_s=0.1, **(runner_kw or {})
    )
    try:
        results = await runner.run(plan, on_tick=on_tick)
    finally:
        totals = await engine.stop()
    return results, records, events, totals


def chunk_tokens(records: list[RequestRecord], t0: float, t1: float | None) -> int:
    assert t1 is not None
    return sum(
        n
        for r in records
        for t, n in zip(r.chunk_times_s, r.chunk_tokens or (1,) * len(r.chunk_times_s), strict=True)
        if t0 <= t < t1
    )


async def test_each_step_is_measured_on_its_own_and_its_tokens_by_chunk_time() -> None:
    plan = [
        StepSpec(concurrency=1, duration_s=0.6, warmup_s=0.1),
        StepSpec(concurrency=4, duration_s=0.6, warmup_s=0.1),
    ]
    results, records, events, totals = await run_plan(plan, ttft_s=0.005, itl_s=0.002)
    assert [r.span.level.value for r, _ in results] == [1, 4]
    for (r, _), c in zip(results, (1, 4), strict=True):
        s = r.stats
        assert s.completed > 0 and s.failed == 0 and s.warmup_excluded >= c
        assert abs(s.achieved_concurrency - c) < 0.5
        assert s.duration_s == pytest.approx(0.6, abs=0.05) and s.slo_attainment == 1.0
        # the tokens whose chunks arrived in the measured time (whatever pace this machine
        # gave the scripted server: at most one token every 2 ms per stream)
        measured = chunk_tokens(records, r.span.measure_from_s, r.span.end_s)
        assert s.output_throughput_tok_s == pytest.approx(measured / s.duration_s, rel=0.01)
        assert s.output_throughput_tok_s < 1.05 * c * 500
    # four streams at once: more tokens than one (the scripted server shares this test's loop,
    # so its pace is this host's: 2.1x, not 4x, beside a loaded suite)
    assert (
        results[1][0].stats.output_throughput_tok_s
        > 1.5 * results[0][0].stats.output_throughput_tok_s
    )
    assert [e.kind for e in events] == ["begin", "end", "begin", "end"]
    assert len(records) == totals.sent == totals.succeeded


async def test_a_request_limited_step_sends_exactly_n_and_ignores_the_duration() -> None:
    plan = [StepSpec(concurrency=2, duration_s=0.05, warmup_s=0.0, max_requests=10)]
    results, records, _, _ = await run_plan(plan, ttft_s=0.01, itl_s=0.001)
    s = results[0][0].stats
    assert s.completed == 10 and len(records) == 10  # exactly N, as vllm bench serve --num-prompts
    assert s.duration_s > 0.05  # measured until the last request ended


def test_the_table_fits_100_columns() -> None:
    spec = StepSpec(concurrency=1024)
    line = row(10, spec, stats(1024, 12345), EdgeRate(123456.0, 10.0))
    assert len(header(False)) <= 100 and len(line) <= 100
    assert len(header(True)) > 100  # --wide
    assert row(0, StepSpec(concurrency=4), stats(4, 0, failed=2), EdgeRate(None, None)).split()[
        :4
    ] == ["1", "c=4", "0", "2"]


def test_verdict_exit_codes(capsys) -> None:
    ok = {
        "steps": [stats(1, 3).to_dict()],
        "knee": None,
        "slo_max_concurrency": None,
        "top_errors": [],
    }
    assert verdict(ok) == 0
    some = {
        **ok,
        "steps": [stats(1, 3, failed=1).to_dict()],
        "top_errors": [{"error": "reset: x", "count": 1}],
    }
    assert verdict(some) == 1 and "1 of 4 requests failed" in capsys.readouterr().err
    with pytest.raises(CliError, match="no request succeeded"):
        verdict({**some, "steps": [stats(1, 0, failed=2).to_dict()]})
    with pytest.raises(CliError, match="lengthen --step-duration") as exc:
        verdict({**ok, "steps": [stats(1, 0).to_dict()]})
    assert str(exc.value).startswith("no measured request: none was sent in the 1.0 s measured")
    assert "unknown error" not in str(exc.value) and "0 failed" not in str(exc.value)


async def test_a_request_limited_rate_step_is_judged_over_its_sending_time() -> None:
    """Issue 17, finding 14: 20 requests at 20 req/s take ~1 s to send and each lasts ~1 s;
    the step is measured to its last request's end (~2 s), but its rate is the 20 over the
    ~1 s it sent for, not 10 req/s "of target 20"."""
    plan = [StepSpec(rate=20.0, duration_s=0.05, warmup_s=0.0, max_requests=20)]
    results, _, _, _ = await run_plan(plan, ttft_s=0.5, itl_s=0.025)
    s = results[0][0].stats
    assert s.completed == 20 and s.duration_s > 1.3  # measured through the drain
    assert not s.client_limited, s.client_notes


def test_a_rate_step_short_only_by_poisson_noise_is_not_client_limited() -> None:
    """2 req/s for 20 s expects 40 arrivals, with a standard deviation of 6.3: 30 is noise,
    15 is a client that could not keep up."""

    def step(n: int):
        recs = [
            RequestRecord(
                request_id=i, sent_s=i * 0.5, chunk_times_s=(i * 0.5 + 0.1,), end_s=i * 0.5 + 0.1
            )
            for i in range(n)
        ]
        return summarize(recs, 20.0, rate=2.0, loop_lag_p99_s=0.005)

    assert not step(30).client_limited
    assert step(15).client_notes == ("achieved rate 0.75 of target 2 req/s",)


def starve_first_step(every_s: float = 0.3, steps: int = 1):
    """An ``on_tick`` that takes the CPU from the load loop (in process: the same loop) for
    ``every_s`` at each measure tick of the first ``steps`` steps, as a host that starves the
    client does; the steps after them run free."""

    def on_tick(p) -> None:
        if p.index < steps and p.phase == "measure":
            time.sleep(every_s)

    return on_tick


async def test_a_step_the_client_self_check_flags_is_retaken(tmp_path, capsys) -> None:
    said: list[str] = []
    back: list[float] = []

    def realtime_wait() -> float:  # the load thread is back in real time 1 s after it is asked
        if not back:
            back.append(time.monotonic() + 1.0)
        return max(0.0, back[0] - time.monotonic())

    plan = [StepSpec(concurrency=2, duration_s=1.2, warmup_s=0.1)]
    results, _, _, _ = await run_plan(
        plan,
        runner_kw={"retakes": 3, "realtime_wait": realtime_wait, "on_retake": said.append},
        on_tick=starve_first_step(),
        ttft_s=0.005,
        itl_s=0.002,
    )
    flagged = [r.stats.client_late for r, _ in results]
    assert flagged[0], results[0][0].stats.loop_lag_p99_s  # the starved step
    assert not flagged[-1] and 2 <= len(results) <= 4  # retaken until one measured the server
    assert said[0].startswith("retake 1 of 3: step 1 (c=2) again, its client timestamps were late")
    assert "once the load thread is back in real time (~1 s)" in said[0]  # it said, and waited:
    first, retake = results[0][0].span, results[1][0].span
    assert retake.segments[0].start_s - first.segments[-1].end_s >= 1.0
    assert retake.revisit_of == first.index
    # the trials count the steps that measured the server, and say which they left out
    write_trials([r for r, _ in results], tmp_path, {})
    doc = json.loads((tmp_path / "trials.json").read_text())
    kept = [r for r, _ in results if not r.stats.client_late]
    assert [lv["n"] for lv in doc["levels"]] == [len(kept)]
    assert doc["left_out"][0] == {
        "step": first.index,
        "why": "client self-check: the client's timestamps were late",
    }
    assert f"trials leave out step {first.index}" in capsys.readouterr().out
    assert {r.span.level.value for r, _ in results} == {2}


async def test_no_retake_unless_asked_and_none_past_the_budget() -> None:
    plan = [StepSpec(concurrency=2, duration_s=1.2, warmup_s=0.1)]
    results, _, _, _ = await run_plan(plan, on_tick=starve_first_step(), ttft_s=0.005)
    assert [r.stats.client_late for r, _ in results] == [True]
    said: list[str] = []
    results, _, _, _ = await run_plan(
        plan,
        runner_kw={"retakes": 1, "on_retake": said.append},
        on_tick=starve_first_step(steps=5),  # the host starves the client throughout
        ttft_s=0.005,
    )
    assert [r.stats.client_late for r, _ in results] == [True, True]  # one retake, then no more
    assert len(said) == 1 and said[0].startswith("retake 1 of 1: step 1 (c=2) again")


@pytest.mark.parametrize("extra", [("--repeat", "3"), ("--retake", "2"), ("--retake", "-1")])
def test_a_search_with_trials_or_retakes_is_refused_before_a_session_is_made(
    tmp_path, capsys, extra
) -> None:
    session = tmp_path / "s"
    argv = ["bench", "http://127.0.0.1:9", "--search", "slo", "--slo", "ttft=100ms"]
    assert main([*argv, "--session-dir", str(session), *extra]) == 2
    assert not session.exists()  # refused before the server is reached or a session made
    err = capsys.readouterr().err
    assert ("--retake: 0 or more" if extra[1] == "-1" else "a search re-measures itself") in err
