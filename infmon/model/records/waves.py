"""A closed loop's waves: how many requests were sent together.

In a closed loop every user sends its next request when its last one ends. When the requests
are alike (one prompt length, one output length: ``--ignore-eos``), users whose requests ended in
the same engine step send again together, their new requests are prefilled in one step and end
together again: the loop falls into waves, and stays in them until jitter breaks them up. A
request in a wave of ``w`` waits for the API server to take in the ``w - 1`` sent with it, and
shares its prefill step with them, so its TTFT grows with ``w``. On the real vLLM here (CPU build,
c=16, ten rounds of one bench run, 4 Dec) the wave a request was sent in averaged 1.6 to 4.9
requests from round to round, and the rounds' TTFT p50 moved with it (8.7 ms in the round of 1.6,
21-29 ms in rounds of 3.3 and more; r = 0.74): the same load, a different state of the loop.

Requests sent within ``gap_s`` of the request before belong to one wave. Half the level's TPOT
separates them: the requests that end in one engine step reach the client within the API
server's and the client's turn over them (a fraction of a millisecond each), the next step's a
TPOT later. Pure: send times in, one number out.
"""

from __future__ import annotations

import math

import numpy as np

from infmon.model.records.columns import RecordColumns

WAVE_GAP_TPOT = 0.5
"""Sends closer than this share of the step's median TPOT are one wave."""


def wave_size(sent_s: np.ndarray, gap_s: float) -> float:
    """The mean size of the wave a request was sent in (each request counts once: a wave of
    ``w`` counts ``w`` times), over sends whose next is within ``gap_s`` of the one before;
    NaN with no sends."""
    if len(sent_s) == 0 or not gap_s > 0:
        return math.nan
    t = np.sort(np.asarray(sent_s, dtype=float))
    starts = np.concatenate(([True], np.diff(t) > gap_s))
    sizes = np.diff(np.concatenate((np.flatnonzero(starts), [len(t)])))
    return float((sizes * sizes).sum() / sizes.sum())


def step_wave(cols: RecordColumns) -> float:
    """The wave size of one step's measured requests (``wave_size``, its gap half the median
    TPOT of the requests that streamed two tokens or more); NaN when none did."""
    streamed = (cols.first_us >= 0) & (cols.last_us > cols.first_us) & (cols.output_tokens >= 2)
    if not streamed.any():
        return math.nan
    tpot_s = (cols.last_us[streamed] - cols.first_us[streamed]) / 1e6
    tpot_s = tpot_s / (cols.output_tokens[streamed] - 1)
    return wave_size(cols.sent_s, WAVE_GAP_TPOT * float(np.median(tpot_s)))
