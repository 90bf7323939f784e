"""Fuzzing every parser of untrusted input: nothing escapes but the documented clear error types.

- SSE decoder (``SSEError``) and the stream's JSON events (failures become request records);
- the exposition parser (``ExpositionError``), mutated real vLLM/SGLang/TGI pages included, and
  the canonical snapshot built from whatever parsed, plus the rate window between two pages;
- dataset loaders (``DatasetError``) on bytes, text and JSON structures;
- the config loader (``ConfigError``) on TOML files, environment and command-line values.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infmon.config import build_config
from infmon.config_values import ConfigError
from infmon.load.client import StreamFailure, StreamState
from infmon.load.sse import SSEDecoder, SSEError
from infmon.load.workload import DatasetError, Prompt, load_dataset
from infmon.sources.canonical import snapshot_from, snapshot_of_page
from infmon.sources.exposition import ExpositionError, Page, parse_exposition
from infmon.sources.readings import read_page
from tests.conftest import FIXTURES

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAGES = sorted((FIXTURES / "metrics").glob("*.prom"))
PAGE_TEXTS = [p.read_bytes()[:6000] for p in PAGES]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=20,
)
stream_objects = st.fixed_dictionaries(
    {},
    optional={
        "choices": json_values
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "text": json_values,
                    "delta": json_values | st.fixed_dictionaries({"content": json_values}),
                    "finish_reason": json_values,
                    "token_ids": json_values,
                },
            ),
            max_size=2,
        ),
        "usage": json_values
        | st.fixed_dictionaries({"prompt_tokens": json_values, "completion_tokens": json_values}),
        "error": json_values,
    },
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _decode(chunks: list[bytes], limit: int = 4 * 1024 * 1024) -> list:
    d = SSEDecoder(max_event_bytes=limit)
    out = []
    for c in chunks:
        out += d.feed(c)
    return out + d.finish()


# ------------------------------------------------------------------------------------------ SSE

sse_fields = st.sampled_from([b"data", b"event", b"id", b"retry", b"", b":", b"dat", b"data "])
sse_lines = st.tuples(sse_fields, st.sampled_from([b":", b": ", b""]), st.binary(max_size=20)).map(
    b"".join
)
sse_streams = st.lists(
    st.tuples(sse_lines, st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\n\r\n"])),
    max_size=12,
).map(lambda parts: b"".join(a + b for a, b in parts))


@FUZZ
@given(sse_streams, st.lists(st.integers(min_value=0), max_size=12))
def test_sse_any_split_of_any_stream_gives_the_same_events(stream: bytes, cuts: list[int]) -> None:
    assert _decode(_split(stream, cuts)) == _decode([stream])


@FUZZ
@given(st.binary(max_size=400), st.lists(st.integers(min_value=0), max_size=8), st.integers(1, 64))
def test_sse_line_limit_raises_only_sse_error(data: bytes, cuts: list[int], limit: int) -> None:
    try:
        events = _decode(_split(data, cuts), limit)
    except SSEError:
        return
    assert all(isinstance(e.data, str) for e in events)


@FUZZ
@given(st.one_of(stream_objects.map(json.dumps), json_values.map(json.dumps), st.text(max_size=40)))
def test_stream_events_fail_only_as_stream_failures(data: str) -> None:
    """Whatever JSON (or not) a server puts in ``data:``, the request fails as data or succeeds."""
    state = StreamState(keep_text=True)
    try:
        state.event(data, 1.0)
    except StreamFailure as exc:
        assert exc.kind in ("protocol", "server") and str(exc)
        return
    assert state.texts is not None and all(isinstance(t, str) for t in state.texts)
    assert state.output_tokens is None or isinstance(state.output_tokens, int)


# ------------------------------------------------------------------------------------ exposition


def _mutate(data: bytes, ops: list[tuple[int, int, bytes]]) -> bytes:
    for pos, kind, blob in ops:
        i = pos % (len(data) + 1)
        if kind == 0:
            data = data[:i] + blob + data[i:]
        elif kind == 1:
            data = data[:i] + data[i + len(blob) + 1 :]
        else:
            data = data[:i] + blob + data[i + len(blob) :]
    return data


_BLOBS = [
    b"{",
    b"}",
    b'"',
    b"\\",
    b"\n",
    b"#",
    b" ",
    b"NaN",
    b"+Inf",
    b"-1e308",
    b"\xff",
    b"\x00",
    b"=",
    b",",
    b"_total",
    b"# EOF\n",
    b"# TYPE x histogram\n",
    b'le="',
    b"\t",
]
mutations = st.lists(
    st.tuples(
        st.integers(min_value=0), st.integers(0, 2), st.sampled_from(_BLOBS) | st.binary(max_size=4)
    ),
    max_size=6,
)


def _assert_page_or_error(data: bytes | str) -> Page | None:
    try:
        page = parse_exposition(data)
    except ExpositionError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    snap = snapshot_of_page(page, timestamp_s=1.0)
    for value in (snap.running, snap.waiting, snap.kv_cache_usage):
        assert value is None or isinstance(value, float)
    return page


@FUZZ
@given(st.sampled_from(PAGE_TEXTS), mutations)
def test_mutated_real_pages_parse_or_raise_exposition_error(page: bytes, ops: list) -> None:
    _assert_page_or_error(_mutate(page, ops))


@FUZZ
@given(st.sampled_from(PAGE_TEXTS), mutations, mutations)
def test_rates_between_two_mutated_pages_never_raise(page: bytes, ops1: list, ops2: list) -> None:
    """A restart, a truncated or odd page between two scrapes: the window math still holds."""
    a, b = _assert_page_or_error(_mutate(page, ops1)), _assert_page_or_error(_mutate(page, ops2))
    if a is None or b is None:
        return
    snap = snapshot_from(read_page(b), read_page(a), timestamp_s=2.0, window_s=1.0)
    rate = snap.generation_tokens_per_s
    assert rate is None or not math.isinf(rate)


label_values = st.text(max_size=12).map(
    lambda s: s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "vllm:num_requests_running",
                    "vllm:kv_cache_usage_perc",
                    "vllm:generation_tokens_total",
                    "sglang:num_queue_reqs",
                    "x",
                ]
            ),
            st.dictionaries(
                st.sampled_from(["model_name", "engine", "le", "[bold]"]), label_values, max_size=3
            ),
            st.floats() | st.integers(-(2**70), 2**70),
        ),
        max_size=10,
    )
)
def test_generated_pages_with_any_labels_and_values(samples: list) -> None:
    lines = []
    for name, labels, value in samples:
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{body}}} {value}")
    _assert_page_or_error("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------- datasets


def _load(content: bytes, name: str = "d.jsonl") -> list[Prompt] | None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(content)
        try:
            prompts = load_dataset(path)
        except DatasetError as exc:
            assert str(exc) and "\n" not in str(exc)
            return None
    assert prompts and all(isinstance(p, Prompt) for p in prompts)
    for p in prompts:
        assert isinstance(p.as_text(), str) and isinstance(p.as_messages(), list)
    return prompts


@FUZZ
@given(st.binary(max_size=300))
def test_dataset_bytes(content: bytes) -> None:
    _load(content)


conversation = st.fixed_dictionaries(
    {},
    optional={
        "conversations": json_values
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "from": st.sampled_from(["human", "user", "gpt", 3]),
                    "value": json_values,
                },
            ),
            max_size=3,
        )
    },
)
dataset_line = st.fixed_dictionaries(
    {},
    optional={
        "prompt": json_values,
        "messages": json_values
        | st.lists(
            st.fixed_dictionaries({}, optional={"role": json_values, "content": json_values}),
            max_size=3,
        ),
    },
)


@FUZZ
@given(st.lists(dataset_line | json_values, max_size=5))
def test_dataset_jsonl_structures(lines: list) -> None:
    _load("\n".join(json.dumps(x) for x in lines).encode())


@FUZZ
@given(st.lists(conversation | json_values, max_size=5))
def test_dataset_sharegpt_structures(convs: list) -> None:
    _load(json.dumps(convs).encode(), "d.json")


# ----------------------------------------------------------------------------------------- config

KEYS = [
    "url",
    "api_key",
    "model",
    "endpoint",
    "prompt_tokens",
    "output_tokens",
    "dataset",
    "seed",
    "slo",
    "session_dir",
    "label",
    "concurrency",
    "rate",
    "max_concurrency",
    "arrival",
    "step_duration",
    "step_requests",
    "warmup",
    "ignore_eos",
    "connect_timeout",
    "read_timeout",
    "ca_bundle",
    "insecure",
    "api_key_file",
    "unknown_key",
]
toml_scalars = (
    st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.booleans()
    | st.text(max_size=12)
    | st.sampled_from(["1979-05-27", "07:32:00", "1979-05-27T07:32:00Z"])
)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if (isinstance(v, str) and v[:4].isdigit()) or isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v)


def _build(text: str | None = None, env: dict | None = None, cli: dict | None = None) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.toml"
        if text is not None:
            path.write_text(text, encoding="utf-8")
        try:
            config = build_config(
                cli or {}, environ=env or {}, config_file=str(path) if text is not None else None
            )
        except ConfigError as exc:
            assert str(exc)
            return
    assert config.prompt_tokens.upper >= 1 and config.output_lengths.upper >= 1
    assert all(c >= 1 for c in config.concurrency) and all(r > 0 for r in config.rate)
    assert config.step_duration_s > 0 and config.read_timeout_s > 0
    config.to_public_dict()


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(KEYS), toml_scalars | st.lists(toml_scalars, max_size=3), max_size=6
    )
)
def test_config_files_with_any_keys_and_values(raw: dict) -> None:
    _build("\n".join(f"{k} = {_toml_value(v)}" for k, v in raw.items()) + "\n")


@FUZZ
@given(st.binary(max_size=200))
def test_config_file_bytes(content: bytes) -> None:
    _build(
        content.decode("utf-8", "surrogateescape")
        .encode("utf-8", "surrogateescape")
        .decode("utf-8", "replace")
    )


@FUZZ
@given(
    st.dictionaries(st.sampled_from(KEYS), st.text(max_size=16), max_size=6),
    st.dictionaries(st.sampled_from(KEYS), st.text(max_size=16), max_size=6),
)
def test_env_and_cli_values(env_raw: dict, cli: dict) -> None:
    env = {f"INFMON_{k.upper()}": v.replace("\x00", "") for k, v in env_raw.items()}
    _build(env=env, cli={k: v for k, v in cli.items() if k != "unknown_key"})
