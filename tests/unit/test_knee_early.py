"""The server's queue names the knee before the client's figures can (issue 17: the demo names
its knee within 90 s).

A level's step is judged by the client's figures only once it has run ``MIN_HOLD_S`` (5 s);
the server's queue is plain sooner. At c=512 on a server whose batch holds 256, every scrape
from the first says 256 running and ~256 waiting: the knee at c=256 is named two seconds into
the level, as confirming, and confirmed when the step is judged. A level's step-up queue (the
new streams waiting their turn for a prefill) drains within a scrape or two and names nothing.
"""

from __future__ import annotations

import math

from infmon.model.steps.evidence import ServerSample
from infmon.model.steps.knee import (
    EARLY_SPAN_S,
    KneePoint,
    find_knee,
    points_of,
    queued_throughout,
    slo_max_concurrency,
)
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import CLOSED, Level
from infmon.report.doc import StepEntry
from infmon.report.stepstats import knee_points
from tests.unit.test_clean_steps import stream

WARMUP_S = 0.6
STEP_S = 30.0


def level_256_then_512(waiting_at_512: list[float]) -> tuple[StepLedger, float]:
    """c=128 and c=256 judged (the batch not full), then c=512 from ``t``: one scrape a
    second after its warm-up, ``waiting_at_512`` waiting behind 256 running."""
    led = StepLedger()
    for i, c in enumerate((128, 256), start=1):
        t0 = STEP_S * (i - 1)
        led.apply(led.book.begin(Level(CLOSED, c), t0, "sweep", WARMUP_S, {}))
        led.note_inflight(0, t0 + 0.1, [(i, c)])
        for k in range(60 * i):  # twice the throughput at twice the streams
            led.add_record(stream(1000 * i + k, i, t0 + 1 + 0.4 / i * k, 64, 0.02 * i))
        for s in range(2, 29):
            led.add_sample(ServerSample(t0 + s, running=c, waiting=0.0, kv_usage=0.4))
    t = 2 * STEP_S
    led.apply(led.book.begin(Level(CLOSED, 512), t, "sweep", WARMUP_S, {2: 256}))
    led.note_inflight(0, t + 0.1, [(2, 256), (3, 512)])
    for k, w in enumerate(waiting_at_512):
        led.add_sample(ServerSample(t + 1.0 + k, running=256, waiting=w, kv_usage=0.6))
    return led, t


def test_every_scrape_queued_over_two_seconds_is_saturation() -> None:
    ts = [0.0, 1.0, 2.0]
    assert queued_throughout(512, ts, [256] * 3, [254, 256, 250])
    assert not queued_throughout(512, ts, [256] * 3, [254, 40, 250])  # it drained once
    assert not queued_throughout(512, ts[:2], [256] * 2, [254, 256])  # too few scrapes
    assert not queued_throughout(512, [0.0, 0.5, 1.0], [256] * 3, [254] * 3)  # too short
    assert not queued_throughout(512, ts, [0.0] * 3, [254] * 3)  # nothing running: not a batch
    assert EARLY_SPAN_S == 2.0


def test_the_queue_names_the_knee_two_seconds_into_the_level() -> None:
    led, t = level_256_then_512([254, 255, 256])
    now = t + 3.5  # three scrapes, 2 s apart end to end; the step is 2.9 s measured
    result = led.results(now)[-1]
    assert not result.eligible and result.queued
    knee = find_knee(led.knee_points(now))
    assert knee is not None and knee.concurrency == 256 and knee.evidence == "server"
    assert not knee.confirmed, "named from the queue alone: confirming until the step is judged"
    assert "running capped at 256 while 255 wait at c=512" in knee.reason
    assert knee.label == "c=256 (confirming)"


def test_two_scrapes_are_not_enough_and_a_step_up_queue_names_nothing() -> None:
    led, t = level_256_then_512([254, 255])
    assert find_knee(led.knee_points(t + 3.0)) is None
    led, t = level_256_then_512([200, 12, 0, 0])  # the new streams admitted within a second
    assert not led.results(t + 5.0)[-1].queued
    assert find_knee(led.knee_points(t + 5.0)) is None


def test_the_knee_is_confirmed_when_the_step_is_judged() -> None:
    led, t = level_256_then_512([254, 255, 256, 256, 255, 254, 256, 255])
    for k in range(60):
        led.add_record(stream(3000 + k, 3, t + 1 + 0.1 * k, 64, 0.06))
    now = t + 9.0
    result = led.results(now)[-1]
    assert result.eligible and not result.queued
    knee = find_knee(led.knee_points(now))
    assert knee is not None and knee.concurrency == 256 and knee.confirmed


def test_a_level_ended_before_it_was_judged_keeps_its_queue_in_the_report() -> None:
    """The operator quits 3.5 s into c=512: the step is never judged by the client's figures,
    but the report says what the server's queue said, by the same rule."""
    led, t = level_256_then_512([254, 255, 256])
    led.apply(led.book.end(t + 3.5))
    led.settle()
    entries: list[StepEntry] = [StepEntry(**r.to_dict()) for r in led.settled_results()]
    assert entries[-1]["queued"] is True and entries[-1]["eligible"] is False
    assert all("queued" not in e for e in entries[:-1])
    live = find_knee([r.knee_point for r in led.settled_results()])
    replayed = find_knee(knee_points(entries))
    assert live is not None and live == replayed
    assert (live.concurrency, live.confirmed) == (256, False)


def test_a_judged_step_at_the_level_outranks_an_earlier_queue_only_one() -> None:
    """The operator left c=512 after 3 s, came back later and held it: that step's figures are
    the level's point, not the first visit's queue alone."""
    queue_only = KneePoint.of_queue(512.0, 256.0, 255.0, 0.6)
    judged = KneePoint(512.0, 6571.0, 9000.0, math.nan, 256.0, 254.0, 0.6)
    assert points_of([queue_only, None, judged]) == [judged]
    assert points_of([judged, queue_only]) == [judged]
    assert points_of([queue_only]) == [queue_only]


def test_the_slo_limit_reads_no_queue_only_point() -> None:
    met = [KneePoint(float(c), 100.0 * c, 100.0, 0.99) for c in (1, 2, 4)]
    early = KneePoint.of_queue(8.0, 4.0, 4.0, 0.5)
    assert slo_max_concurrency([*met, early]) == 4
    assert slo_max_concurrency([met[0], KneePoint.of_queue(2.0, 1.0, 1.0, 0.5), met[2]]) == 4
