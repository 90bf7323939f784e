"""The latency pane's anatomy view (``a``): each step's E2E split by the server's own figures.

One row per step (p50 of each part, ms): to the server and the first token back (``front``),
queue, prefill, decode, the stream's delivery lag (``tail``), and the client-side share
(front + tail) of E2E; then the latest step's p90 of each part, the requests with the largest
client-side share, and the self-check. Text only; the numbers come from ``model/records/anatomy``.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from infmon.model.live.anatomy_live import AnatomyView
from infmon.model.records.anatomy import PARTS

TITLE = "Latency anatomy (server's per-request view)"
HEAD = ("front", "queue", "prefill", "decode", "tail")
NO_DATA = (
    "no per-request server timings yet: vLLM sends them when started with "
    "--enable-per-request-metrics (press a to go back)"
)


def _v(x: float) -> str:
    if x != x:
        return "–"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}"


def anatomy_text(view: AnatomyView, style: Callable[[str], str]) -> Text:
    if not view.rows:
        extra = f" ({view.without:,} requests without them)" if view.without else ""
        return Text(NO_DATA + extra, style=style("muted"), no_wrap=True, overflow="ellipsis")
    parts: list[tuple[str, str] | str] = [
        (f"{'step':<6}{'n':>5}", style("muted")),
        *((f"{h:>7}", style("muted")) for h in HEAD),
        (f"{'client':>7}{'share':>6}", style("muted")),
        "\n",
    ]
    for row in view.rows:
        a = row.anatomy
        parts.append((f"{row.label:<6}{a.requests:>5}", style("muted")))
        parts += [f"{_v(a.part(name).p50_ms):>7}" for name in PARTS]
        parts.append((f"{_v(a.client.p50_ms):>7}", style("client")))
        parts.append((f"{a.client_fraction_p50 * 100:>5.0f}%", style("client")))
        parts.append("\n")
    last = view.rows[-1]
    p90 = " ".join(f"{n} {_v(last.anatomy.part(n).p90_ms)}" for n in PARTS)
    parts.append((f"p90 at {last.label} (ms): {p90}\n", style("muted")))
    if view.top:
        top = " · ".join(
            f"#{u.request_id} {_v(u.client_ms)} of {_v(u.e2e_ms)}" for u in view.top[:3]
        )
        parts.append((f"most client-side (ms): {top}", style("muted")))
    if view.growth:
        parts += ["\n", (f"⚠ {view.growth}", style("warning"))]
    return Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
