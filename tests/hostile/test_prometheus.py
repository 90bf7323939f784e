"""The Prometheus source under attack: hostile series labels, an answer that drips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean, assert_clean_run, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def test_hostile_series_labels_through_prometheus(tmp_path: Path) -> None:
    with serve("prom-escape") as (url, _):
        text = run_infmon("scrape", "--prometheus", url, home=tmp_path)
        as_json = run_infmon("scrape", "--prometheus", url, "--json", home=tmp_path)
    for ran in (text, as_json):
        assert ran.returncode == 0, ran.show()
        assert_clean_run(ran)
    assert "hostile\\x1b]0;PWNED-TITLE" in text.stdout  # the pod row, escaped
    doc = json.loads(as_json.stdout)
    pods = [e["labels"].get("pod", "") for e in doc["engines"]]
    assert pods and all(p.startswith("hostile\\x1b]0;") for p in pods), pods
    assert_clean(json.dumps(doc, ensure_ascii=False), "the parsed --json values")


def test_a_dripping_prometheus_times_out(tmp_path: Path) -> None:
    """One snapshot is ~20 queries; they share one deadline (not 20 × the timeout)."""
    with serve("prom-drip") as (url, _):
        ran = run_infmon(
            "scrape", "--prometheus", url, "--metrics-timeout", "2s", home=tmp_path, timeout_s=40
        )
    assert ran.returncode == 2
    assert_clean_run(ran)
    assert ran.elapsed_s < 10, ran.elapsed_s
    assert "no complete answer within 2 s" in ran.stderr and ran.stderr.count("\n") == 1
