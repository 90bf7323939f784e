"""What the hostile server says: the escape payload, metric pages, SSE streams and error bodies."""

from __future__ import annotations

import functools
import gzip
import json

PAYLOAD = (
    "\x1b]0;PWNED-TITLE\x07"  # OSC 0: set the window / tmux pane title
    "\x1b]52;c;UFdORUQtQ0xJUA==\x07"  # OSC 52: write the clipboard (tmux paste buffer)
    "\x1b[2J\x1b[31;1mred\x1b[0m"  # CSI: clear the screen, colours
    "\x9b2J"  # C1 CSI (8-bit)
    "\u202eevil\u202c\u2066iso\u2069"  # bidi override and isolate
    "\x00\x08\x7f\r"  # NUL, backspace, DEL, carriage return
)
"""Every kind of control sequence a terminal, a page or an XML parser could act on."""
MARK = "hostile"
"""Printable text carried next to the payload, so a test can see the value did arrive."""
HOSTILE_TEXT = f"{MARK}{PAYLOAD}{MARK}"
METRIC_TEXT = HOSTILE_TEXT.replace("\x00", "")
"""For metric labels: a NUL byte makes the whole page a parse error (tested on its own)."""


def label_value(text: str) -> str:
    """Exposition-format escaping of a label value (backslash, quote, newline)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def vllm_page(
    model: str,
    generated: float,
    *,
    engine: str = "0",
    config_labels: dict[str, str] | None = None,
    help_text: str = "Number of requests",
    running: str = "1",
    kv: str = "0.25",
    preemptions: str = "0",
) -> bytes:
    """A small vLLM V1 page (the names and types vLLM 0.9+ exposes)."""
    lab = f'engine="{label_value(engine)}",model_name="{label_value(model)}"'
    cfg = {"block_size": "16", "num_gpu_blocks": "1000", "cache_dtype": "auto"}
    cfg.update(config_labels or {})
    cfg_lab = ",".join(f'{k}="{label_value(v)}"' for k, v in cfg.items())
    lines = [
        f"# HELP vllm:num_requests_running {help_text}",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{lab}}} {running}",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{lab}}} 0",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{lab}}} {kv}",
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{lab}}} {generated}",
        "# TYPE vllm:prompt_tokens counter",
        f"vllm:prompt_tokens_total{{{lab}}} {generated}",
        "# TYPE vllm:num_preemptions counter",
        f"vllm:num_preemptions_total{{{lab}}} {preemptions}",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{{cfg_lab},engine="{label_value(engine)}"}} 1',
    ]
    return ("\n".join(lines) + "\n").encode()


def many_series_page(series: int) -> bytes:
    """A label-cardinality explosion: one gauge with ``series`` label sets (~60 bytes each)."""
    rows = "".join(
        f'vllm:num_requests_running{{engine="{i}",model_name="m"}} 1\n' for i in range(series)
    )
    return ("# TYPE vllm:num_requests_running gauge\n" + rows).encode()


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(chat: bool, text: str, finish: str | None) -> bytes:
    choice: dict[str, object] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return sse({"id": "h", "object": "x", "choices": [choice]})


def usage_chunk(prompt_tokens: object, completion_tokens: object) -> bytes:
    """The final usage chunk; a Python int is written as a JSON integer of any size."""
    body = (
        '{"id": "h", "choices": [], "usage": {"prompt_tokens": '
        + _num(prompt_tokens)
        + ', "completion_tokens": '
        + _num(completion_tokens)
        + "}}"
    )
    return b"data: " + body.encode() + b"\n\n"


def _num(v: object) -> str:
    return str(v) if isinstance(v, int) else json.dumps(v)


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "server_error"}}).encode()


def prom_answer(metric: dict[str, str], value: str = "1") -> bytes:
    """A Prometheus instant-query answer with one series (every query gets it)."""
    result = [{"metric": metric, "value": [1700000000.0, value]}]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


@functools.cache
def complex_page(mode: str) -> tuple[bytes, dict[str, str]]:
    """A page that is cheap to send and costly to parse (body, extra headers)."""
    if mode == "blank-gzip":
        return gzip.compress(b"\n" * (16 * 1024 * 1024), 9), {"Content-Encoding": "gzip"}
    if mode == "many-labels":
        labels = ",".join(f'l{i}="v"' for i in range(256_000))
        return (
            f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{labels}}} 1\n".encode(),
            {},
        )
    labels = ",".join(f'l{i}="v"' for i in range(120))  # within the labels cap: slow to parse
    rows = "".join(f'vllm:num_requests_running{{{labels},k="{j}"}} 1\n' for j in range(10_000))
    return f"# TYPE vllm:num_requests_running gauge\n{rows}".encode(), {}


@functools.cache
def tokenize_answer(mode: str, path: str) -> bytes:
    """A hostile tokenizer: 15 MB of ids per call, or a count that never grows."""
    if path == "/detokenize":
        return b'{"prompt": "Hello world"}'
    ids = [1] * 1_500_000 if mode == "huge-tokenize" else [1, 2, 3]
    return json.dumps({"count": len(ids), "tokens": ids, "max_model_len": 2048}).encode()
