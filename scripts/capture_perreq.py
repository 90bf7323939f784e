"""Capture real vLLM 0.32 answers with per-request metrics on, for ``tests/fixtures``.

    flock /tmp/infmon-heavy.lock python scripts/capture_perreq.py OUT_DIR spec|plain

Starts vLLM (``scripts/real_servers.py``: the cached CPU build and the tiny model) with
``--enable-per-request-metrics`` (and, for ``spec``, the n-gram drafter with
``--per-request-spec-decode-metrics detailed``), sends three streamed completions of one prompt
(the last body is kept), one streamed chat completion and one whole completion, then saves
``/metrics``. The bodies are saved byte for byte.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.real.harness import rs

PROMPT = "def f(): pass def f(): pass def f(): pass def f(): pass"
CHAT = [{"role": "user", "content": "x = 1; x = 1; x = 1; x = 1;"}]


def post_raw(url: str, body: dict[str, object]) -> bytes:
    head = {"Content-Type": "application/json"}
    req = urllib.request.Request(url, json.dumps(body).encode(), head)
    with urllib.request.urlopen(req, timeout=120) as r:
        return bytes(r.read())


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return bytes(r.read())


def main(out: Path, spec: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tag = "spec" if spec else "plain"
    usage = {"stream": True, "stream_options": {"include_usage": True}, "temperature": 0}
    with rs.serve_vllm(out / "logs", spec=spec, per_request=True) as s:
        body = {"model": rs.MODEL_NAME, "prompt": PROMPT, "max_tokens": 24, **usage}
        for _ in range(3):  # the same prompt thrice: what a prefix cache would reuse
            raw = post_raw(s.url + "/v1/completions", body)
        (out / f"vllm-0.32-perreq-{tag}-completions.sse").write_bytes(raw)
        body = {"model": rs.MODEL_NAME, "messages": CHAT, "max_tokens": 16, **usage}
        raw = post_raw(s.url + "/v1/chat/completions", body)
        (out / f"vllm-0.32-perreq-{tag}-chat.sse").write_bytes(raw)
        body = {"model": rs.MODEL_NAME, "prompt": PROMPT, "max_tokens": 8, "temperature": 0}
        raw = post_raw(s.url + "/v1/completions", body)
        (out / f"vllm-0.32-perreq-{tag}-completions.json").write_bytes(raw)
        (out / f"vllm-0.32-perreq-{tag}.prom").write_bytes(get(s.url + "/metrics"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("spec", "plain"):
        sys.exit("usage: python scripts/capture_perreq.py OUT_DIR spec|plain")
    main(Path(sys.argv[1]), sys.argv[2] == "spec")
