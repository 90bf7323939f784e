"""bench's pure parts: the result document, the row format and the exit verdict."""

from __future__ import annotations

from collections import Counter

import pytest

from infmon.cli import CliError
from infmon.commands.bench import SCHEMA, _result, _row, _verdict
from infmon.config import Config
from infmon.load.steps import StepSpec
from infmon.model.records import RequestRecord
from infmon.model.stats import summarize


def stats(c: int, ok: int, failed: int = 0):
    recs = [
        RequestRecord(
            request_id=i, sent_s=0.0, chunk_times_s=(0.1, 0.2), end_s=0.2, output_tokens=2
        )
        for i in range(ok)
    ]
    recs += [RequestRecord(request_id=99, sent_s=0.0, end_s=0.1, error_kind="reset")] * failed
    return summarize(recs, 1.0, concurrency=c, achieved_concurrency=float(c))


def test_result_document_shape() -> None:
    target = {"url": "http://x", "model": "m", "endpoint": "chat"}
    doc = _result(target, [stats(1, 3), stats(2, 6)], Counter(), Config(api_key="sk-x"))
    assert doc["schema"] == SCHEMA == "infmon.bench/1"
    assert doc["target"] == target and [s["concurrency"] for s in doc["steps"]] == [1, 2]
    assert "knee" in doc and "slo_max_concurrency" in doc
    assert "sk-x" not in str(doc)


def test_row_shows_missing_values_as_dashes() -> None:
    row = _row(0, StepSpec(concurrency=4), stats(4, 0, failed=2))
    assert row.split()[:4] == ["1", "c=4", "0", "2"] and "-/-" in row


def test_verdict_exit_codes(capsys) -> None:
    ok = {
        "steps": [stats(1, 3).to_dict()],
        "knee": None,
        "slo_max_concurrency": None,
        "top_errors": [],
    }
    assert _verdict(ok) == 0
    some = {
        **ok,
        "steps": [stats(1, 3, failed=1).to_dict()],
        "top_errors": [{"error": "reset: x", "count": 1}],
    }
    assert _verdict(some) == 1 and "1 of 4 requests failed" in capsys.readouterr().err
    with pytest.raises(CliError, match="no request succeeded"):
        _verdict({**some, "steps": [stats(1, 0, failed=2).to_dict()]})
