"""The diagnosis rules read vLLM's 2025–26 families: why requests wait, KV offload, sleep."""

from __future__ import annotations

from infmon.model.live.dashboard import ServerView
from infmon.model.live.diagnose import DiagnosisInputs, asleep, kv_offload, queueing
from infmon.model.live.server_view import server_view_from
from infmon.model.server.families import DetailView, KvOffload, ServerDetail, detail_view
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import parse_exposition
from tests.conftest import REPO


def _inputs(server: ServerView) -> DiagnosisInputs:
    return DiagnosisInputs(server, 100.0, (), 30.0, "closed", 256, 256, False)


def test_queueing_says_why_the_requests_wait() -> None:
    base = ServerView(has_data=True, running=8, max_num_seqs=8, waiting=240)
    plain = queueing(_inputs(base))
    assert plain is not None and plain.text == "queueing: 240 waiting, running at max_num_seqs 8"
    why = DetailView(waiting_capacity=240, waiting_deferred=0)
    d = queueing(_inputs(ServerView(**{**_fields(base), "detail": why})))
    assert d is not None
    assert d.text == "queueing: 240 waiting for capacity, 0 deferred, running at max_num_seqs 8"


def _fields(v: ServerView) -> dict:
    return {k: getattr(v, k) for k in v.__dataclass_fields__}


def test_kv_offload_and_sleep_lines() -> None:
    off = detail_view(
        ServerDetail(kv_offload=KvOffload(load_bytes_per_s=1.2e9, load_time_fraction=0.18))
    )
    line = kv_offload(_inputs(ServerView(has_data=True, detail=off)))
    assert line is not None
    assert line.text == "KV offload: 1.2 GB/s loaded back, 18% of the time spent loading"
    quiet = detail_view(ServerDetail(kv_offload=KvOffload(load_time_fraction=0.01)))
    assert kv_offload(_inputs(ServerView(has_data=True, detail=quiet))) is None
    sleeping = detail_view(ServerDetail(sleep_state="weights_offloaded"))
    line = asleep(_inputs(ServerView(has_data=True, detail=sleeping)))
    assert line is not None and "a state, not an outage" in line.text


def test_the_real_page_gives_the_view_its_figures_and_an_old_page_none() -> None:
    page = REPO / "tests/fixtures/metrics/vllm-v1-0.32-cpu-perreq-spec.prom"
    view = server_view_from(snapshot_of_page(parse_exposition(page.read_text())))
    d = view.detail
    assert d is not None and d.waiting_capacity == 0 and d.waiting_deferred == 0
    assert d.cache_hit_share == 0.0 and d.sleep_state == "awake"
    mixed = snapshot_of_page(parse_exposition(page.read_text()))
    assert detail_view(mixed.detail, 5.0).waiting_capacity != 0  # 0 + 0 is not 5: nan
    old = REPO / "tests/fixtures/metrics/vllm-v1-0.10.0-glm45-ps617-part1.prom"
    assert server_view_from(snapshot_of_page(parse_exposition(old.read_text()))).detail is None
