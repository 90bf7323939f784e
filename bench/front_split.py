"""Where the API server's part of TTFT goes: three clocks of one request's first token.

A client's TTFT on vLLM is the engine's queued → first token (its per-request timings,
``--enable-per-request-metrics``) plus the rest, the API server's part (``sim --fit`` fits it as
``request_s`` and ``frontend_stream_s``). vLLM's own TTFT histogram
(``vllm:time_to_first_token_seconds``, in each scrape's window) is timed in the API server from
the request's arrival stamp, taken as it starts rendering the prompt (vLLM 0.32:
``Renderer.render_cmpl_async``, before tokenising), to the moment its output loop takes the
first token in (``IterationStats``), so it splits that rest in two:

- **outside**: client TTFT − the histogram's mean: the HTTP request and its parsing before the
  stamp, the first chunk's SSE write after the output loop, and its read (this client and the
  loopback included);
- **inside**: the histogram's mean − the engine's queued → first token: tokenising, the
  request's trip to the engine core, its wait for the step under way, and the first token's
  trip back to the output loop.

Per level of a bench session (means over its rounds): the histogram's mean is each step's
server evidence (``ServerEvidence.server_ttft_s``: the scrape windows wholly inside the step),
as the report's anatomy splits the front with it:

    python bench/front_split.py SESSION_DIR ...

README ("Fitted to your own server") cites its figures for the real vLLM here.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sessions", nargs="+", type=Path, help="bench session directories")
    args = p.parse_args(argv)

    from infmon.commands.simfit_read import read_session
    from infmon.model.steps.evidence import ServerEvidence
    from infmon.report import build_summary

    for session in args.sessions:
        obs, _ = read_session(session, "both", [])
        doc = build_summary(session)  # each step's server evidence holds the histogram's mean
        hist = {
            int(st["step"]): ev.server_ttft_s
            for st in doc["steps"]
            if (ev := ServerEvidence.from_dict(st.get("server_evidence"))) is not None
        }
        rows: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
        tok_s: dict[int, list[float]] = defaultdict(list)
        for o in obs:
            tok_s[o.concurrency].append(o.output_tok_s)
            h = hist.get(o.step, math.nan)
            if math.isfinite(h):
                rows[o.concurrency].append((o.ttft_s, h, o.server_ttft_s))
        print(f"{session}: ms, means over each level's rounds")
        print("     c  client TTFT  vLLM's TTFT histogram  engine queued→first  outside  inside")
        for c in sorted(rows):
            client, api, engine = (
                1e3 * sum(r[i] for r in rows[c]) / len(rows[c]) for i in range(3)
            )
            print(
                f"  {c:4}  {client:11.2f}  {api:21.2f}  {engine:19.2f}  {client - api:7.2f}"
                f"  {api - engine:6.2f}"
            )
        if line := growth_line(rows, tok_s):
            print(line)
    return 0


def growth_line(
    rows: dict[int, list[tuple[float, float, float]]], tok_s: dict[int, list[float]]
) -> str | None:
    """How the front (client TTFT - the engine's queued -> first token) grew past c=1 from
    c=4 to the widest level, beside what ``sim --fit``'s two forms make of a fit at c = 1-4:
    the line (one wait per other open stream, ``c - 1``) and the rate form (one per token/s
    the other streams take). None without c = 1, 4 and a wider level, or when the front did
    not grow from c=1 to c=4 (no growth to compare)."""
    top = max(rows, default=0)
    if not {1, 4} <= rows.keys() or top <= 4:
        return None

    def front(c: int) -> float:
        return sum(r[0] - r[2] for r in rows[c]) / len(rows[c])

    def others_tok_s(c: int) -> float:
        return sum(tok_s[c]) / len(tok_s[c]) * (c - 1) / c

    if front(4) <= front(1):
        return None
    grew = (front(top) - front(1)) / (front(4) - front(1))
    rate = others_tok_s(top) / others_tok_s(4)
    return (
        f"  front past c=1, c=4 -> c={top}: grew {grew:.1f}x; "
        f"the line {(top - 1) / 3:.1f}x, the rate form {rate:.1f}x"
    )


if __name__ == "__main__":
    raise SystemExit(main())
