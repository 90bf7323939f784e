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

Per level of a bench session (means over its rounds; a round's scrapes after its warm-up):

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


def step_windows(session: Path) -> dict[int, tuple[float, float]]:
    """Each step's measured span on the journal's clock: after its warm-up, to its end."""
    from infmon.journal.reader import SessionReader

    begin: dict[int, float] = {}
    out: dict[int, tuple[float, float]] = {}
    with SessionReader(session) as reader:
        for e in reader.iter_events():
            if e.get("kind") == "step_begin":
                begin[int(e["index"])] = float(e["t"]) + float(e.get("warmup_s") or 0.0)
            elif e.get("kind") == "step_end" and int(e["index"]) in begin:
                out[int(e["index"])] = (begin[int(e["index"])], float(e["t"]))
    return out


def histogram_ttft_s(session: Path, windows: dict[int, tuple[float, float]]) -> dict[int, float]:
    """Per step: the mean of vLLM's TTFT histogram over the scrape windows wholly inside its
    measured span (none of the level before, nor of its warm-up), weighted by their counts."""
    from infmon.journal.reader import SessionReader

    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    last = -math.inf  # the window of a scrape runs from the scrape before it
    with SessionReader(session) as reader:
        for line in reader.iter_scrapes():
            t, opened = float(line["t"]), last
            last = t
            ttft = ((line.get("snap") or {}).get("latency_s") or {}).get("ttft") or {}
            n, mean = ttft.get("count"), ttft.get("mean")
            if not n or mean is None:
                continue
            for step, (lo, hi) in windows.items():
                if lo <= opened and t <= hi:  # the whole window inside the measured span
                    sums[step][0] += n * mean
                    sums[step][1] += n
    return {step: (s / n if n else math.nan) for step, (s, n) in sums.items()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sessions", nargs="+", type=Path, help="bench session directories")
    args = p.parse_args(argv)

    from infmon.commands.simfit_read import read_session

    for session in args.sessions:
        obs, _ = read_session(session, "both", [])
        steps = sorted(step_windows(session))
        hist = histogram_ttft_s(session, step_windows(session))
        if len(steps) != len(obs):  # a flagged step: the report's order of the steps kept
            import json

            doc = json.loads((session / "report.json").read_text())
            steps = [int(st["step"]) for st in doc["steps"] if not st.get("client_late")]
        rows: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
        for step, o in zip(steps, obs, strict=True):
            h = hist.get(step, math.nan)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
