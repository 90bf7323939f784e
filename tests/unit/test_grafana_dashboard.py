"""``docs/grafana-infmon.json``: every series a panel queries exists, infmon's on the exporter's
page and vLLM's on a real vLLM page; the panels do not overlap."""

from __future__ import annotations

import json
import re

from prometheus_client import generate_latest

from infmon.engine.types import RecordBatch
from infmon.exporter import ClientExporter
from tests.conftest import FIXTURES, REPO
from tests.unit.test_exporter import rec

DASHBOARD = REPO / "docs" / "grafana-infmon.json"
VLLM_PAGE = FIXTURES / "metrics" / "vllm-v1-0.32-cpu-tiny-gpt2.prom"
NAME = re.compile(r"(?<![$\w])(infmon_[a-z_0-9]+|vllm:[a-z_0-9]+)")


def exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def names_on(page: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in page.splitlines() if line[:1] != "#"}


def test_every_series_a_panel_queries_exists() -> None:
    ex = ClientExporter()
    ex.records(RecordBatch(0, [rec(1, 0.05), rec(2, 0.0, error="http_5xx")]))  # every series
    ours = names_on(generate_latest(ex.registry).decode())
    vllm = names_on(VLLM_PAGE.read_text())
    used = {n for e in exprs() for n in NAME.findall(e)}
    assert any(n.startswith("infmon_") for n in used) and any(n.startswith("vllm:") for n in used)
    for n in used:
        assert n in (ours if n.startswith("infmon_") else vllm), n


def test_panels_do_not_overlap() -> None:
    d = json.loads(DASHBOARD.read_text())
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not mine & cells, p["title"]
        cells |= mine
