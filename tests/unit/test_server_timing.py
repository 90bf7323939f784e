"""The server's per-request figures: parsed from real vLLM 0.32 answers, checked, journaled."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import numpy as np
import pytest

from infmon.clock import FakeClock
from infmon.journal import JournalWriter
from infmon.journal.codec import decode_record, encode_record
from infmon.journal.reader import SessionReader
from infmon.load.client import StreamingClient
from infmon.load.params import ClientError, ClientParams
from infmon.load.stream_state import StreamState, check_complete
from infmon.model.records.anatomy import anatomy_of_columns, anatomy_of_records, client_growth
from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord
from infmon.model.records.server_timing import (
    ServerTiming,
    SpecFigures,
    decode_timing,
    encode_timing,
    parse_server_metrics,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perreq"


def _feed(name: str) -> StreamState:
    st = StreamState(keep_text=False, max_output_tokens=64)
    for i, byte in enumerate((FIX / name).read_bytes()):  # one byte at a time
        st.feed(bytes([byte]), float(i))
    st.finish(1e9)
    check_complete(st)
    st.settle_usage()
    return st


def _final_metrics(name: str) -> dict[str, object]:
    for line in (FIX / name).read_text().splitlines():
        if line.startswith("data: {") and '"metrics"' in line:
            return dict(json.loads(line[6:])["metrics"])
    raise AssertionError("no metrics in " + name)


@pytest.mark.parametrize(
    "name",
    [
        "vllm-0.32-perreq-plain-completions.sse",
        "vllm-0.32-perreq-plain-chat.sse",
        "vllm-0.32-perreq-spec-completions.sse",
        "vllm-0.32-perreq-spec-chat.sse",
    ],
)
def test_real_streams_carry_the_servers_figures(name: str) -> None:
    st = _feed(name)
    page = _final_metrics(name)
    t = st.server_timing
    assert t is not None
    assert t.queue_ms == page["queue_time_ms"]
    assert t.prefill_ms == page["time_to_first_token_ms"]
    assert t.decode_ms == page["generation_time_ms"]
    assert t.mean_itl_ms == page["mean_itl_ms"]
    assert t.tokens_per_s == page["tokens_per_second"]
    # vLLM's definition: generation time over output tokens - 1
    assert st.output_tokens is not None
    assert t.mean_itl_ms == pytest.approx(t.decode_ms / (st.output_tokens - 1))
    if "spec" in name:
        sd = page["speculative_decoding"]
        assert isinstance(sd, dict) and t.spec is not None
        assert t.spec.num_spec_steps == sd["num_spec_steps"]
        assert t.spec.num_draft_tokens == sd["num_draft_tokens"]
        assert t.spec.num_accepted_draft_tokens == sd["num_accepted_draft_tokens"]
        assert t.spec.acceptance_histogram == tuple(sd["acceptance_histogram"])
        assert t.spec.acceptance_rate == pytest.approx(sd["draft_acceptance_rate"])
        assert t.spec.mean_acceptance_length == pytest.approx(
            1 + sd["num_accepted_draft_tokens"] / sd["num_spec_steps"]
        )
    else:
        assert t.spec is None


def test_the_whole_response_shape_parses_too() -> None:
    body = json.loads((FIX / "vllm-0.32-perreq-spec-completions.json").read_text())
    t = parse_server_metrics(body["metrics"])
    assert t is not None and t.spec is not None and t.spec.num_spec_tokens == 3


@pytest.mark.parametrize(
    "bad",
    [
        "1.5",
        -3.0,
        float("inf"),
        float("nan"),
        1e300,
        True,
        None,
        [1.0],
        {"x": 1},
    ],
)
def test_impossible_values_are_dropped_never_zero(bad: object) -> None:
    t = parse_server_metrics({"queue_time_ms": bad, "time_to_first_token_ms": 4.0})
    assert t is not None and math.isnan(t.queue_ms) and t.prefill_ms == 4.0
    assert parse_server_metrics({"queue_time_ms": bad}) is None


def test_hostile_spec_objects_are_refused() -> None:
    ok = {"num_spec_steps": 2, "num_draft_tokens": 6, "num_accepted_draft_tokens": 3}
    assert parse_server_metrics({"speculative_decoding": ok}) is not None
    for bad in (
        {**ok, "num_accepted_draft_tokens": 7},  # more accepted than drafted
        {**ok, "num_spec_steps": -1},
        {**ok, "num_draft_tokens": 10**12},
        {**ok, "num_draft_tokens": "6"},
        "speculative",
    ):
        assert parse_server_metrics({"speculative_decoding": bad}) is None
    huge = parse_server_metrics(
        {"speculative_decoding": {**ok, "acceptance_histogram": [1] * 10**4}}
    )
    assert huge is not None and huge.spec is not None and huge.spec.acceptance_histogram == ()
    assert parse_server_metrics("metrics") is None
    assert parse_server_metrics([]) is None


SPEC = SpecFigures(8, 19, 15, 3, 2.875, 15 / 19, (1, 2, 2, 3))


def _rec(i: int, server: ServerTiming | None, task: str | None = None) -> RequestRecord:
    sent = 100.0 + i
    return RequestRecord(
        request_id=i,
        sent_s=sent,
        chunk_times_s=(sent + 0.020, sent + 0.030, sent + 0.040),
        end_s=sent + 0.041,
        chunk_tokens=(1, 1, 1),
        prompt_tokens=10,
        output_tokens=3,
        server=server,
        task=task,
    )


TIMING = ServerTiming(1.5, 12.25, 18.0, 9.0, 120.0, SPEC)


def test_journal_lines_and_rows_keep_the_figures(tmp_path: Path) -> None:
    recs = [_rec(1, TIMING, "edit-code"), _rec(2, None), _rec(3, ServerTiming(2.0, 3.0, 4.0))]
    for r in recs:
        assert decode_record(json.loads(json.dumps(encode_record(r)))) == r
    assert decode_timing(encode_timing(TIMING)) == TIMING
    with JournalWriter(tmp_path, autoflush=False) as j:
        for r in recs:
            j.write_record(r)
    back = list(SessionReader(tmp_path).iter_records())
    assert [b.server for b in back] == [r.server for r in recs]
    assert [b.task for b in back] == ["edit-code", None, None]
    cols = SessionReader(tmp_path).read_columns()
    assert cols.server is not None
    assert cols.server.queue_ms[[0, 2]].tolist() == [1.5, 2.0]
    assert math.isnan(cols.server.queue_ms[1])
    assert cols.server.spec_accepted[0] == 15 and math.isnan(cols.server.spec_accepted[2])
    assert cols.server.task_of() == ["edit-code", None, None]
    mem = RecordColumns.from_records(recs)
    assert mem.server is not None and mem.server.task_of() == cols.server.task_of()
    picked = mem.take(np.array([2, 0]))
    assert picked.server is not None and picked.server.task_of() == [None, "edit-code"]
    both = RecordColumns.concat([RecordColumns.from_records([_rec(9, None)]), mem])
    assert both.server is not None and both.server.task_of() == [None, "edit-code", None, None]


def test_the_split_adds_up_and_counts_what_the_server_did_not_describe() -> None:
    recs = [_rec(1, ServerTiming(1.0, 12.0, 18.0)), _rec(2, None)]
    a = anatomy_of_records(recs)
    assert a is not None and a.requests == 1 and a.without == 1
    # client TTFT 20 ms = 1 + 12 + front 7; decode span 20 ms = 18 + tail 2
    assert a.part("front").p50_ms == pytest.approx(7.0)
    assert a.part("tail").p50_ms == pytest.approx(2.0)
    total = sum(q.p50_ms for _, q in a.parts)
    assert total == pytest.approx(a.e2e.p50_ms)
    assert a.client.p50_ms == pytest.approx(9.0)
    assert a.top[0].request_id == 1 and a.negative == 0
    assert anatomy_of_columns(RecordColumns.from_records(recs)) == a
    assert anatomy_of_records([_rec(1, None)]) is None


def test_a_server_span_longer_than_the_clients_is_counted() -> None:
    a = anatomy_of_records([_rec(1, ServerTiming(10.0, 12.0, 30.0))])  # 52 ms > 40 ms E2E
    assert a is not None and a.negative == 1


def test_the_self_check_fires_only_when_the_client_share_grows() -> None:
    def at(front_ms: float) -> object:
        t = ServerTiming(1.0, 20.0 - 1.0 - front_ms, 20.0)
        a = anatomy_of_records([_rec(1, t)])
        assert a is not None
        return a

    flat = client_growth([(1, at(1.0)), (8, at(1.5)), (32, at(2.0))])  # type: ignore[list-item]
    assert flat is None
    grew = client_growth([(1, at(1.0)), (32, at(15.0))])  # type: ignore[list-item]
    assert grew is not None and "client or the network" in grew.text()
    # two steps at one load (the sweep came back to a level): no comparison of the anatomies
    # themselves (the live monitor died on it when the knee search revisited c=8)
    again = client_growth([(8, at(1.0)), (8, at(1.2)), (1, at(1.0))])  # type: ignore[list-item]
    assert again is None


def _real_body_transport(name: str, seen: list[dict] | None = None) -> httpx.MockTransport:
    raw = (FIX / name).read_bytes()

    async def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    return httpx.MockTransport(handler)


async def test_the_probe_finds_per_request_metrics_and_every_record_carries_them() -> None:
    seen: list[dict] = []
    transport = _real_body_transport("vllm-0.32-perreq-spec-completions.sse", seen)
    params = ClientParams(base_url="http://test", model="tiny-gpt2")
    client = StreamingClient(params, FakeClock(5.0), transport=transport)
    try:
        caps = await client.detect_capabilities()
        assert caps.per_request_metrics and caps.stream_options
        rec = await client.stream(1, "hi", 24, task="edit-code")
    finally:
        await client.aclose()
    assert seen[0]["stream_options"] == {"include_usage": True}
    assert rec.ok and rec.server is not None and rec.server.spec is not None
    assert rec.task == "edit-code"
    assert rec.server.spec.num_spec_steps == 8


async def test_asking_for_them_from_a_server_without_says_what_to_do() -> None:
    transport = _real_body_transport("vllm-0.32-perreq-plain-chat.sse")
    params = ClientParams(base_url="http://test", model="tiny-gpt2")
    client = StreamingClient(params, FakeClock(5.0), transport=transport)
    try:
        assert (await client.detect_capabilities()).per_request_metrics
    finally:
        await client.aclose()
    plain = b'data: {"choices":[{"index":0,"text":"a","finish_reason":"length"}]}\n\n'
    plain += b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    plain += b"data: [DONE]\n\n"

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=plain)

    params = ClientParams(
        base_url="http://test", model="tiny-gpt2", require_per_request_metrics=True
    )
    client = StreamingClient(params, FakeClock(5.0), transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(ClientError, match="--enable-per-request-metrics"):
            await client.detect_capabilities()
    finally:
        await client.aclose()
    loose = ClientParams(base_url="http://test", model="tiny-gpt2")
    client = StreamingClient(loose, FakeClock(5.0), transport=httpx.MockTransport(handler))
    try:
        assert not (await client.detect_capabilities()).per_request_metrics
    finally:
        await client.aclose()


def test_the_servers_ttft_histogram_says_whether_the_front_grew_in_its_api_server() -> None:
    """The front (client TTFT − the engine's queued → first token) grew from 1 to 15 ms. The
    server's TTFT histogram (vLLM's API server clock) splits it: grown inside the API server
    (the histogram grew with it) the self-check names the API server; grown outside it (the
    histogram stayed) the client or the network, each with the figures."""

    def at(front_ms: float) -> object:
        t = ServerTiming(1.0, 20.0 - 1.0 - front_ms, 20.0)  # the client's TTFT: 20 ms
        a = anatomy_of_records([_rec(1, t)])
        assert a is not None and a.engine_ttft_mean_ms == pytest.approx(20.0 - front_ms)
        return a

    loads = [(1, at(1.0)), (32, at(15.0))]
    inside = client_growth(loads, [19.5, 18.0])  # type: ignore[arg-type]
    assert inside is not None and inside.in_api_server
    assert inside.low_split is not None and inside.high_split is not None
    assert inside.low_split.api_server_ms == pytest.approx(0.5)
    assert inside.high_split.api_server_ms == pytest.approx(13.0)
    assert inside.high_split.outside_ms == pytest.approx(2.0)
    assert "mostly inside the server's API process" in inside.text()
    assert "0.5 → 13.0 ms (means), the rest 0.5 → 2.0 ms" in inside.text()
    outside = client_growth(loads, [19.5, 6.0])  # type: ignore[arg-type]
    assert outside is not None and not outside.in_api_server
    assert "outside the server" in outside.text() and "client or the network" in outside.text()
    # one end without the histogram: no split, as before it
    unknown = client_growth(loads, [19.5, math.nan])  # type: ignore[arg-type]
    assert unknown is not None and unknown.high_split is None
    assert "the server's own times do not explain it" in unknown.text()


def test_the_monitors_self_check_leads_with_its_conclusion() -> None:
    """The anatomy pane is narrow: its line says who limits first, the figures after."""

    def at(front_ms: float) -> object:
        a = anatomy_of_records([_rec(1, ServerTiming(1.0, 20.0 - 1.0 - front_ms, 20.0))])
        assert a is not None
        return a

    loads = [(1, at(1.0)), (32, at(15.0))]
    inside = client_growth(loads, [19.5, 18.0])  # type: ignore[arg-type]
    outside = client_growth(loads, [19.5, 6.0])  # type: ignore[arg-type]
    unknown = client_growth(loads)  # type: ignore[arg-type]
    assert inside is not None and outside is not None and unknown is not None
    assert inside.short() == (
        "API server limits: its part 0.5 → 13.0 ms, client-side 1.0 → 15.0 ms (1 → 32)"
    )
    assert outside.short() == (
        "client or network limits: client-side 1.0 → 15.0 ms (1 → 32), "
        "the API server's part 0.5 → 1.0 ms"
    )
    assert unknown.short() == "client or network limits: client-side 1.0 → 15.0 ms (1 → 32)"
