"""Send the probes greedily (temperature 0) and score them; optionally against a baseline.

The probes go through the load client (``StreamingClient``) built from the run's ``Config``:
the same API key sources (``INFMON_API_KEY``, the config file, key files) and redaction, TLS
settings, bounds and sanitising as every other command; the answer is the streamed text,
control characters escaped. Errors are data: a probe that fails is recorded with its error
kind and a clean message (never the key, never raw server bytes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from infmon.config import Config
from infmon.load.client import StreamingClient
from infmon.load.params import ClientError, ClientParams
from infmon.quality.probes import Probe
from infmon.quality.scoring import drift, is_correct

SCHEMA = "infmon.quality/1"
MAX_TOKENS = 48
GREEDY = {"temperature": 0, "seed": 0}


class QualityError(Exception):
    """The run could not start (server unreachable, no model, bad baseline)."""


def quality_client(
    config: Config, parallel: int = 8, transport: httpx.AsyncBaseTransport | None = None
) -> StreamingClient:
    """The load client for probes: output length not pinned (answers end where they end)."""
    try:
        params = ClientParams.from_config(replace(config, ignore_eos=False), parallel)
        return StreamingClient(params, transport=transport)
    except ClientError as exc:
        raise QualityError(exc.message) from None


async def _one(
    client: StreamingClient, sem: asyncio.Semaphore, index: int, probe: Probe
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": probe.id,
        "prompt": probe.prompt,
        "expect": probe.expect,
        "match": probe.match,
        "output": None,
        "correct": False,
    }
    async with sem:
        rec = await client.stream(
            index, probe.prompt, MAX_TOKENS, keep_text=True, extra_body=GREEDY
        )
    if not rec.ok:
        row["error"] = f"{rec.error_kind}: {rec.error_message or 'failed'}"
        return row
    text = rec.output_text or ""
    row.update(output=text, output_tokens=rec.output_tokens, correct=is_correct(probe, text))
    return row


async def run_quality(
    config: Config,
    probes: Sequence[Probe],
    baseline: dict[str, Any] | None = None,
    parallel: int = 8,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Run every probe and return the result document (``infmon quality --json``)."""
    client = quality_client(config, parallel, transport)
    try:
        try:
            model = await client.resolve_model()
            await client.detect_capabilities()
        except ClientError as exc:
            raise QualityError(exc.message) from None
        sem = asyncio.Semaphore(parallel)
        results = await asyncio.gather(*(_one(client, sem, i, p) for i, p in enumerate(probes)))
    finally:
        await client.aclose()
    correct = sum(r["correct"] for r in results)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "url": client.params.base_url,
        "model": model,
        "endpoint": client.params.endpoint,
        "temperature": 0,
        "probes": len(results),
        "correct": correct,
        "errors": sum("error" in r for r in results),
        "accuracy": correct / len(results) if results else None,
        "results": list(results),
    }
    if baseline is not None:
        d = drift(results, baseline.get("results") or [])
        doc.update(
            baseline=baseline.get("source") or baseline.get("url"),
            compared=d.compared,
            agreement=d.agreement,
            length_ratio=d.length_ratio,
            first_divergence=d.divergences,
            baseline_accuracy=baseline.get("accuracy"),
        )
    return doc


def load_baseline(path: Path) -> dict[str, Any]:
    """A quality result from a quality JSON, a report.json, or a session directory."""
    path = Path(path)
    candidates = [path / "quality.json", path / "report.json"] if path.is_dir() else [path]
    for c in candidates:
        if not c.exists():
            continue
        try:
            doc = json.loads(c.read_text())
        except ValueError:
            raise QualityError(f"{c}: not JSON") from None
        doc = doc.get("quality") or doc if "results" not in doc else doc
        if isinstance(doc, dict) and doc.get("results"):
            return {**doc, "source": str(path)}
    raise QualityError(f"{path}: no quality results found (run `infmon quality` first)")
