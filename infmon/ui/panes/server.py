"""The server's side: running vs max_num_seqs, waiting, preemptions, prefix hits, time split;
and the KV-cache gauge with its capacity in tokens and sequences."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.live.dashboard import EndpointRow, ServerView
from infmon.model.steps.knee import API_CPU_BUSY
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

ROWS_FROM_COLUMNS = 120
"""The fleet's per-endpoint rows show on terminals at least this wide."""


class ServerPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Server"
        yield Body()

    def watch_snapshot(self, s: ServerView) -> None:
        self.query_one(Body).show(self._text(s))

    def _text(self, s: ServerView) -> Text:
        muted = self.style("muted")
        text = Text()
        if not s.up:
            since = f.clock(s.down_since_s) if s.down_since_s is not None else "?"
            text.append(f"DOWN since {since}", self.style("error", True))
            text.append(f": {s.error or 'no response'}\n", self.style("error"))
        elif not s.has_data:
            if s.no_metrics:
                return Text(
                    "no server metrics (the server has no /metrics): client view only", style=muted
                )
            return Text("waiting for the first scrape…", style=muted)
        values = Text.assemble(
            ("running ", muted),
            (f.num(s.running), "bold"),
            ("" if f.missing(s.max_num_seqs) else f" / {f.num(s.max_num_seqs)}", muted),
            ("  waiting ", muted),
            (f.num(s.waiting), self.style("warning", True) if s.waiting else "bold"),
            "\n",
            ("preemptions ", muted),
            f.num(s.preemptions_per_s, 1),
            "/s",
            ("  prefix hits ", muted),
            f.pct(s.prefix_hit_rate),
            "\n",
            *_phases(s, muted),
            *self._api_cpu(s, muted),
            *_detail(s, muted),
            no_wrap=True,
            overflow="ellipsis",
        )
        if not s.up and s.has_data:
            values.stylize("dim")
            values.append(f"\n(last scrape {f.num(s.stale_s)} s ago)", muted)
        text.append_text(values)
        if s.rows and self.app.size.width >= ROWS_FROM_COLUMNS:
            text.append_text(self._rows(s.rows))
        return text

    def _api_cpu(self, s: ServerView, muted: str) -> list[tuple[str, str] | str]:
        """``API server CPU 0.42 cores`` when the server publishes its process CPU; in the
        warning style from ``API_CPU_BUSY`` (its one event loop near its limit)."""
        if f.missing(s.api_cpu_cores):
            return []
        busy = s.api_cpu_cores >= API_CPU_BUSY
        value = f"{s.api_cpu_cores:.2f} cores"
        return [
            "\n",
            ("API server CPU ", muted),
            (value, self.style("warning", True) if busy else ""),
        ]

    def _rows(self, rows: tuple[EndpointRow, ...]) -> Text:
        """One line per endpoint/pod: running, waiting, KV %, generation tok/s; in a
        disaggregated deployment each pod's role (prefill / decode) after its name."""
        muted = self.style("muted")
        width = max(8, min(28, max(len(r.name) for r in rows)))
        roles = any(r.role for r in rows)
        role = f" {'role':<7}" if roles else ""
        out = Text(
            f"\n{'endpoint':<{width}}{role} {'run':>5} {'wait':>5} {'KV':>4} {'gen/s':>7}", muted
        )
        for r in rows:
            out.append(f"\n{r.name[:width]:<{width}} ")
            if roles:
                out.append(f"{r.role or '?':<7} ", "bold" if r.role else muted)
            out.append(f"{f.num(r.running):>5} ", "bold")
            out.append(f"{f.num(r.waiting):>5} ", self.style("warning") if r.waiting else "")
            out.append(f"{f.pct(r.kv_usage_fraction):>4} ")
            out.append(f"{f.num(r.generation_tokens_per_s):>7}")
        return out


def _phases(s: ServerView, muted: str) -> list[tuple[str, str] | str]:
    """``queue <1ms prefill 17ms decode 2.3s``: the server's per-request phase means, each with
    its unit by the one rule (ms under a second, s above), short enough for a 36-column pane."""
    values = (s.queue_s, s.prefill_s, s.decode_s)
    out: list[tuple[str, str] | str] = []
    for i, (name, v) in enumerate(zip(("queue", "prefill", "decode"), values, strict=True)):
        out += [(f"{' ' if i else ''}{name} ", muted), f.ms_short(v)]
    return out


def _detail(s: ServerView, muted: str) -> list[tuple[str, str] | str]:
    """vLLM's 2025–26 families, each only when the server publishes it: why requests wait,
    the prefix-cache share of prompt tokens, KV offload, P/D transfer, LoRA, sleep."""
    d = s.detail
    if d is None:
        return []
    out: list[tuple[str, str] | str] = []

    def add(label: str, value: str) -> None:
        out.extend([("\n" if not out else "  ", ""), (label, muted), value])

    if not (f.missing(d.waiting_capacity) or f.missing(d.waiting_deferred)):
        add(
            "waiting for capacity ",
            f"{f.num(d.waiting_capacity)} deferred {f.num(d.waiting_deferred)}",
        )
    if not f.missing(d.cache_hit_share):
        add("prompt from cache ", f.pct(d.cache_hit_share))
    if not f.missing(d.external_kv_share) and d.external_kv_share > 0:
        add(f"from {d.external_kv_from} ", f.pct(d.external_kv_share))
    if not f.missing(d.offload_load_fraction):
        add("KV offload loading ", f.pct(d.offload_load_fraction) + " of the time")
    if not f.missing(d.pd_xfer_mean_s):
        add("P/D transfer ", f.ms_short(d.pd_xfer_mean_s) + f" ({f.num(d.pd_failed_total)} failed)")
    if d.lora_running is not None:
        add("LoRA ", f"{d.lora_running} running, {d.lora_waiting} waiting")
    if d.sleep_state not in (None, "awake"):
        add("asleep ", str(d.sleep_state))
    if not f.missing(d.mfu):
        add("MFU ", f.pct(d.mfu))
    elif d.mfu_unknown:
        add("MFU ", "unknown (GPU peak not known: --gpu-peak-tflops)")
    return out


class KvPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "KV cache"
        yield Body()

    def watch_snapshot(self, s: ServerView) -> None:
        muted = self.style("muted")
        if not s.has_data:
            empty = "no server metrics" if s.no_metrics else "no KV data yet"
            self.query_one(Body).show(Text(empty, style=muted))
            return
        width = max(10, (self.content_size.width or 30) - 6)
        filled, empty = f.bar(s.kv_usage_fraction, width)
        high = not f.missing(s.kv_usage_fraction) and s.kv_usage_fraction >= 0.9
        text = Text.assemble(
            (filled, self.style("kv-high" if high else "kv-low")),
            (empty, muted),
            (f" {f.pct(s.kv_usage_fraction):>4}", "bold"),
            "\n",
            (f.num(s.kv_capacity_tokens), "bold"),
            (" tokens ≈ ", muted),
            (f.num(s.kv_capacity_seqs), "bold"),
            (" seqs", muted),
        )
        if not f.missing(s.tokens_per_seq):
            text.append(f"\nat {f.num(s.tokens_per_seq)} tokens each", muted)
        if not s.up:
            text.stylize("dim")
        self.query_one(Body).show(text)
