"""Server snapshots made from a real vLLM 0.32 ``/metrics`` capture (``tests/fixtures``) with
the values of a few series set per moment, parsed by infmon's own exposition parser and
canonical mapping (rates from two pages, as a scrape gives them): a test can only show what a
real page can produce."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from infmon.model.server.snapshot import ServerSnapshot
from infmon.sources.canonical import snapshot_from
from infmon.sources.exposition import parse_exposition
from infmon.sources.readings import Readings, read_page
from tests.conftest import FIXTURES

PAGE = (FIXTURES / "metrics" / "vllm-v1-0.32-cpu-tiny-gpt2.prom").read_text()
SPEC_FAMILIES = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-gpt2"} %(drafts)s
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-gpt2"} %(draft_tokens)s
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-gpt2"} %(accepted)s
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
""" + "".join(
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-gpt2",'
    f'position="{i}"}} %(pos{i})s\n'
    for i in range(4)
)
"""vLLM's speculative-decoding counters, in its exposition format (the 0.32 capture served
without a drafter has none)."""


def _set(page: str, family: str, value: float) -> str:
    pattern = re.compile(rf"^({re.escape(family)}\{{[^}}]*\}}) \S+$", re.M)
    assert pattern.search(page), family
    return pattern.sub(lambda m: f"{m.group(1)} {value!r}", page)


@dataclass
class ServerFeed:
    """Successive scrapes of one server: counters grow as the load would make them grow."""

    t: float = 0.0
    generation_total: float = 0.0
    prompt_total: float = 0.0
    preemptions_total: float = 0.0
    api_cpu_total: float = 15.75
    """The API server's ``process_cpu_seconds_total`` (the capture's own at the start)."""
    spec_totals: dict[str, float] = field(default_factory=dict)
    _prev: tuple[float, Readings] | None = None

    def page(self, running: float, waiting: float, kv: float, spec: float | None) -> str:
        page = PAGE
        for family, value in (
            ("vllm:num_requests_running", running),
            ("vllm:num_requests_waiting", waiting),
            ("vllm:kv_cache_usage_perc", kv),
            ("vllm:generation_tokens_total", self.generation_total),
            ("vllm:prompt_tokens_total", self.prompt_total),
            ("vllm:num_preemptions_total", self.preemptions_total),
        ):
            page = _set(page, family, value)
        page = page.replace(
            "process_cpu_seconds_total 15.75", f"process_cpu_seconds_total {self.api_cpu_total!r}"
        )
        if spec is not None:
            page += SPEC_FAMILIES % self.spec_totals
        return page

    def scrape(
        self,
        t: float,
        *,
        running: float = 32,
        waiting: float = 0,
        kv: float = 0.71,
        gen_per_s: float = 1851.0,
        preempt_per_s: float = 0.0,
        spec: float | None = None,
        api_cpu_cores: float = 0.33,
    ) -> ServerSnapshot:
        """The snapshot at ``t``: the page's gauges as given, counters advanced by the rates
        (the API server's CPU as the real vLLM here used it at ~1,700 tok/s: 0.33 cores)."""
        dt = t - self._prev[0] if self._prev else 0.0
        self.api_cpu_total += api_cpu_cores * dt
        self.generation_total += gen_per_s * dt
        self.prompt_total += 2 * gen_per_s * dt
        self.preemptions_total += preempt_per_s * dt
        if spec is not None:
            drafts = gen_per_s * dt / 2
            t0 = self.spec_totals
            t0["drafts"] = t0.get("drafts", 0.0) + drafts
            t0["draft_tokens"] = t0.get("draft_tokens", 0.0) + 4 * drafts
            t0["accepted"] = t0.get("accepted", 0.0) + 4 * drafts * spec
            for i in range(4):
                t0[f"pos{i}"] = t0.get(f"pos{i}", 0.0) + drafts * spec ** (i + 1)
        cur = read_page(parse_exposition(self.page(running, waiting, kv, spec).encode()))
        prev = self._prev
        self._prev = (t, cur)
        return snapshot_from(
            cur, prev[1] if prev else None, timestamp_s=t, window_s=t - prev[0] if prev else None
        )
