"""Parse + derive time per page for the largest metrics fixture (run: python bench/scrape.py).

Prints milliseconds per page for parsing (prometheus_client's parser), reading the backend's
concepts, and deriving a two-page window snapshot, and the share of a 1 s poll interval.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infmon.sources.canonical import snapshot_from
from infmon.sources.exposition import parse_exposition
from infmon.sources.readings import read_page


def fixtures_dir() -> Path:
    repo = Path(__file__).resolve().parents[1]
    for d in (repo.parent, repo.parent.parent):
        if (d / "shared/fixtures/metrics").is_dir():
            return d / "shared/fixtures/metrics"
    raise SystemExit("fixtures not found (expected ../shared/fixtures/metrics)")


def per_call_ms(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1000


def main() -> None:
    page_path = max(fixtures_dir().glob("*.prom"), key=lambda p: p.stat().st_size)
    text = page_path.read_text()
    page = parse_exposition(text)
    readings = read_page(page)
    n = 50
    parse_ms = per_call_ms(lambda: parse_exposition(text), n)
    read_ms = per_call_ms(lambda: read_page(page), n)
    derive_ms = per_call_ms(
        lambda: snapshot_from(readings, readings, timestamp_s=1.0, window_s=1.0), n
    )
    total = parse_ms + read_ms + derive_ms
    print(f"page {page_path.name}: {len(text):,} bytes, {len(page):,} samples")
    print(f"parse  {parse_ms:7.2f} ms/page")
    print(f"read   {read_ms:7.2f} ms/page")
    print(f"derive {derive_ms:7.2f} ms/page")
    print(f"total  {total:7.2f} ms/page = {total / 10:.2f}% of one core at a 1 s interval")


if __name__ == "__main__":
    main()
