"""``requests.csv``: one row per request, written while the journal streams past."""

from __future__ import annotations

import csv
import math
from typing import IO

from infmon.model.records import RequestRecord

HEADER = (
    "request_id",
    "step",
    "concurrency",
    "rate",
    "warmup",
    "ok",
    "error_kind",
    "http_status",
    "sent_s",
    "ttft_ms",
    "tpot_ms",
    "itl_ms_mean",
    "e2el_ms",
    "output_tokens",
    "tokens_estimated",
    "prompt_tokens",
    "chunks",
    "finish_reason",
)


def _ms(v: float) -> str:
    return "" if math.isnan(v) else f"{1e3 * v:.3f}"


class RequestsCsv:
    """Appends rows to an open text file; times relative to the session's clock origin."""

    def __init__(self, f: IO[str], origin_s: float) -> None:
        self.w = csv.writer(f)
        self.w.writerow(HEADER)
        self.origin_s = origin_s

    def add(self, r: RequestRecord) -> None:
        t = r.chunk_times_s
        n = len(t)
        itl_mean = f"{1e3 * (t[-1] - t[0]) / (n - 1):.3f}" if n > 1 else ""
        self.w.writerow(
            (
                r.request_id,
                r.step,
                "" if r.concurrency is None else r.concurrency,
                "" if r.rate is None else r.rate,
                int(r.warmup),
                int(r.ok),
                r.error_kind or "",
                "" if r.http_status is None else r.http_status,
                f"{r.sent_s - self.origin_s:.6f}",
                _ms(r.ttft_s),
                _ms(r.tpot_s),
                itl_mean,
                _ms(r.e2el_s),
                r.output_token_count if r.ok else "",
                int(r.tokens_estimated),
                "" if r.prompt_tokens is None else r.prompt_tokens,
                n,
                r.finish_reason or "",
            )
        )
