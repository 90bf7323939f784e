"""What the untrusted-input defences cost on the hot paths (run: python bench/hostile_cost.py).

1. One stream's chunks through ``StreamState`` (SSE event cap, usage checks, text-chunk count,
   chunk cap, sanitised finish reason) against the irreducible work, ``json.loads`` of each
   event, and, when git can show it, against ``StreamState`` as it is on ``main`` (--ref REF).
2. Parsing the largest ``/metrics`` fixture with ``parse_exposition`` (series cap, the clean-page
   check that skips per-label sanitising) against prometheus_client's parser alone, and against
   the same page with one hostile label (every label then sanitised).
3. ``clean`` on typical strings (the common, clean case) and on a hostile one.

Every figure is a ratio against a reference measured in the same run, so other load on the
machine moves both sides.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from infmon.load.stream_state import StreamState  # noqa: E402
from infmon.model.base.sanitize import clean  # noqa: E402
from infmon.sources.exposition import parse_exposition  # noqa: E402


def best_of(fn: Callable[[], object], repeat: int = 7, number: int = 20) -> float:
    """Seconds per call, the best of ``repeat`` rounds (the least disturbed by other load)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def stream_bytes(chunks: int) -> list[bytes]:
    """A vLLM-like completions stream, one read per chunk, then usage and [DONE]."""
    out = []
    for i in range(chunks):
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None}
        if i == chunks - 1:
            choice["finish_reason"] = "length"
        obj = {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 1,
            "model": "m",
            "choices": [choice],
        }
        out.append(b"data: " + json.dumps(obj).encode() + b"\n\n")
    usage = {
        "id": "cmpl-1",
        "choices": [],
        "usage": {"prompt_tokens": 64, "completion_tokens": chunks},
    }
    out.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def load_ref(ref: str, path: str, alias: str, swap: tuple[str, str] = ("", "")) -> object | None:
    """Module ``path`` as it is at git ``ref`` (None without git or that ref)."""
    try:
        src = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{ref}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if swap[0]:
        src = src.replace(*swap)
    mod = types.ModuleType(alias)
    sys.modules[alias] = mod
    exec(compile(src, f"{ref}:{path}", "exec"), mod.__dict__)
    return mod


def ref_stream_state(ref: str) -> type | None:
    """``StreamState`` from git ``ref`` (with that ref's SSE decoder)."""
    if load_ref(ref, "infmon/load/sse.py", "ref_sse") is None:
        return None
    swap = ("from infmon.load.sse import", "from ref_sse import")
    mod = load_ref(ref, "infmon/load/stream_state.py", "ref_stream_state", swap)
    return None if mod is None else mod.StreamState


def bench_stream(ref: str) -> None:
    reads = stream_bytes(128)

    def run(cls: type, **kw: object) -> Callable[[], object]:
        def once() -> object:
            st = cls(False, **kw)
            for data in reads:
                st.feed(data, 1.0)
            st.finish(2.0)
            if hasattr(st, "settle_usage"):
                st.settle_usage()
            return st

        return once

    def loads_only() -> None:
        for data in reads:
            payload = data[6:-2]
            if payload != b"[DONE]":
                json.loads(payload)

    base = best_of(loads_only)
    now = best_of(run(StreamState, max_output_tokens=128))
    print(f"stream of 128 chunks: json.loads only {base * 1e6 / 130:.2f} µs/event")
    print(
        f"  StreamState (this tree)  {now * 1e6 / 130:.2f} µs/event  = {now / base:.2f}× json.loads"
    )
    old_cls = ref_stream_state(ref)
    if old_cls is not None:
        old = best_of(run(old_cls))
        print(
            f"  StreamState ({ref})   {old * 1e6 / 130:.2f} µs/event  = {old / base:.2f}× json.loads"
        )
        print(f"  this tree / {ref}: {now / old:.2f}×")


def bench_page(ref: str) -> None:
    pages = sorted(
        (REPO / "tests" / "fixtures" / "metrics").glob("*.prom"), key=lambda p: p.stat().st_size
    )
    text = pages[-1].read_text()
    hostile = text.replace('model_name="', 'model_name="\x1b]0;x\x07', 1)

    old = load_ref(ref, "infmon/sources/exposition.py", "ref_exposition")

    def client_only() -> None:
        [s for fam in text_string_to_metric_families(text) for s in fam.samples]

    base = best_of(client_only, number=5)
    plain = best_of(lambda: parse_exposition(text), number=5)
    dirty = best_of(lambda: parse_exposition(hostile), number=5)
    print(
        f"{pages[-1].name} ({len(text) / 1024:.0f} kB): prometheus_client alone {base * 1e3:.2f} ms"
    )
    print(f"  parse_exposition, clean page      {plain * 1e3:.2f} ms = {plain / base:.2f}×")
    print(f"  parse_exposition, one hostile label {dirty * 1e3:.2f} ms = {dirty / base:.2f}×")
    if old is not None:
        was = best_of(lambda: old.parse_exposition(text), number=5)
        print(f"  parse_exposition ({ref}), clean page {was * 1e3:.2f} ms = {was / base:.2f}×")
        print(f"  this tree / {ref} on the clean page: {plain / was:.2f}×")


def bench_clean() -> None:
    typical = ["Qwen/Qwen2.5-7B-Instruct", "HTTP 503 from /v1/completions: busy", "length"]
    hostile = "hostile\x1b]0;PWNED\x07\x1b[2J\u202eevil"

    def identity() -> None:
        for s in typical:
            str(s)

    base = best_of(identity, number=20000)
    ok = best_of(lambda: [clean(s) for s in typical], number=20000)
    bad = best_of(lambda: clean(hostile), number=20000)
    print(
        f"clean(): typical strings {ok * 1e9 / 3:.0f} ns each ({ok / base:.1f}× str()),"
        f" a hostile one {bad * 1e9:.0f} ns"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ref", default="main", help="git ref for the old StreamState (default main)"
    )
    args = parser.parse_args()
    bench_stream(args.ref)
    bench_page(args.ref)
    bench_clean()


if __name__ == "__main__":
    main()
