"""Send the probes greedily (temperature 0) and score them; optionally against a baseline.

Sending goes through one function, ``_complete``, so the transport can change without
touching the scoring. Errors are data: a probe that fails is recorded with its error kind.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from infmon.quality.probes import Probe
from infmon.quality.scoring import drift, is_correct

SCHEMA = "infmon.quality/1"
MAX_TOKENS = 48


class QualityError(Exception):
    """The run could not start (server unreachable, no model, bad baseline)."""


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def first_model(client: httpx.AsyncClient, url: str, api_key: str | None) -> str:
    try:
        resp = await client.get(f"{url}/v1/models", headers=_headers(api_key))
        resp.raise_for_status()
        return str(resp.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        raise QualityError(f"cannot list models at {url}/v1/models: {exc}") from None


async def _complete(
    client: httpx.AsyncClient, url: str, model: str, endpoint: str, prompt: str, api_key: str | None
) -> tuple[str, int | None]:
    """One greedy, non-streaming completion: ``(text, completion_tokens)``."""
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": MAX_TOKENS, "seed": 0}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    resp = await client.post(url + path, json=body, headers=_headers(api_key))
    resp.raise_for_status()
    data = resp.json()
    choice = data["choices"][0]
    text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
    return text or "", (data.get("usage") or {}).get("completion_tokens")


async def _one(
    client: httpx.AsyncClient,
    sem: asyncio.Semaphore,
    url: str,
    model: str,
    endpoint: str,
    probe: Probe,
    api_key: str | None,
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
        try:
            text, tokens = await _complete(client, url, model, endpoint, probe.prompt, api_key)
        except httpx.HTTPStatusError as exc:
            row["error"] = f"HTTP {exc.response.status_code}"
            return row
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            row["error"] = type(exc).__name__
            return row
    row.update(output=text, output_tokens=tokens, correct=is_correct(probe, text))
    return row


async def run_quality(
    url: str,
    probes: Sequence[Probe],
    model: str | None = None,
    endpoint: str = "chat",
    api_key: str | None = None,
    baseline: dict[str, Any] | None = None,
    parallel: int = 8,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Run every probe and return the result document (``infmon quality --json``)."""
    url = url.rstrip("/")
    limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=10.0), limits=limits
    ) as client:
        model = model or await first_model(client, url, api_key)
        sem = asyncio.Semaphore(parallel)
        results = await asyncio.gather(
            *(_one(client, sem, url, model, endpoint, p, api_key) for p in probes)
        )
    correct = sum(r["correct"] for r in results)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "url": url,
        "model": model,
        "endpoint": endpoint,
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
