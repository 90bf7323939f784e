"""The run configuration: one frozen ``Config`` built from four layers.

Precedence, highest first: command-line options > ``INFMON_*`` environment variables >
the TOML config file > built-in defaults. The API key additionally falls back to
``OPENAI_API_KEY`` (below ``INFMON_API_KEY``, above the file). The file lives at
``$XDG_CONFIG_HOME/infmon/config.toml`` (``~/.config/infmon/config.toml`` when
``XDG_CONFIG_HOME`` is unset), or wherever ``--config`` / ``INFMON_CONFIG`` points.
Keys in the file and in the environment use the option names with ``_`` for ``-``
(``output_tokens = "100-200"``, ``INFMON_OUTPUT_TOKENS=100-200``).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from infmon.config_values import (
    ConfigError,
    as_bool,
    as_float_list,
    as_int_list,
    as_lengths,
    as_nonneg_duration,
    as_nonneg_int,
    as_positive_duration,
    as_positive_float,
    as_positive_int,
    as_schedule,
    as_seed,
    as_workload,
    one_of,
    parse_size_bytes,
    parse_slo,
)
from infmon.model.base.sanitize import REDACTED
from infmon.model.records.measures import SLO
from infmon.model.shape.lengths import Lengths, fixed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


DEFAULT_LABEL = "run"
"""A run without ``--label``: reports and comparisons name it by its session directory."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything a run needs; secrets stay out of ``repr`` and of ``to_public_dict``."""

    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    endpoint: str = "completions"
    prompt_tokens: Lengths = field(default_factory=lambda: fixed(128))
    """Whole prompt length (a shared prefix included), counted by the server's tokenizer."""
    output_tokens: Lengths | None = None
    """None: the default, 128 varied by ±10 % (exactly 128 with ``lockstep``)."""
    lockstep: bool = False
    dataset: str | None = None
    workload: str = "corpus"
    """"corpus" (built-in real text), "synthetic" (random words) or a dataset file."""
    shared_prefix_tokens: int = 0
    prefix_groups: int = 1
    turns: int = 1
    think_time_s: float = 0.0
    trace: str | None = None
    time_scale: float = 1.0
    """Trace replay: a trace's time gaps are multiplied by this (0.5 = twice as fast)."""
    schedule: str | None = None
    seed: int = 0
    """``build_config`` draws a fresh one per run unless ``--seed`` is given."""
    slo: SLO = field(default_factory=SLO)
    session_dir: str | None = None
    label: str = DEFAULT_LABEL
    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()
    max_concurrency: int = 256
    """Cap on in-flight requests in rate mode."""
    arrival: str = "poisson"
    step_duration_s: float = 20.0
    step_requests: int | None = None
    warmup_s: float | None = None
    """Warm-up per step; None means 10 % of the step duration."""
    ignore_eos: bool = True
    per_request_metrics: bool = False
    """Require the server's per-request timings (vLLM ``--enable-per-request-metrics``)."""
    load_priority: str = "realtime"
    """A load worker process's thread: ``realtime`` (SCHED_RR 1 where permitted, over a high fair
    share), ``high`` (nice -20 in the fair class, the worker's scheduling group too) or ``normal``."""
    realtime_again: bool = True
    """After real time starved the host, take it again later (``retry_after``'s back-off: a
    monitor left running); False (``infmon bench``): keep the high fair share for the rest of the
    run, so its steps are measured beside one priority (on this project's VM the server ran
    10-25% slower beside a nice -20 client than beside a real-time one)."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    """Longest silence between two reads of a stream (no total timeout)."""
    stall_timeout_s: float = 30.0
    """Longest wait for a stream's next token (0: never cut; ``infmon.load.stall``)."""
    ca_bundle: str | None = None
    insecure: bool = False
    max_event_bytes: int = 1024 * 1024
    """Cap on one SSE event of a stream (beyond it the request fails as ``oversized_event``)."""
    metrics_timeout_s: float = 5.0
    """Total deadline of one ``/metrics`` (or Prometheus) read."""
    metrics_max_bytes: int = 16 * 1024 * 1024
    """Cap on one ``/metrics`` page (or Prometheus answer)."""
    metrics_max_series: int = 100_000
    """Pages with more series than this are rejected (label-cardinality explosions)."""
    gpu_peak_tflops: float | None = None
    """One GPU's dense BF16 peak for MFU (None: from the GPU telemetry's GPU name)."""
    config_file: str | None = None

    @property
    def output_lengths(self) -> Lengths:
        """The output length distribution in force (the default varies unless lockstep)."""
        if self.output_tokens is not None:
            return self.output_tokens
        return fixed(128) if self.lockstep else fixed(128).jittered()

    @property
    def effective_warmup_s(self) -> float:
        if self.warmup_s is not None:
            return self.warmup_s
        return round(0.1 * self.step_duration_s, 3)

    def to_public_dict(self) -> dict[str, Any]:
        """The config as plain data with the API key redacted (for session records)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key":
                value = REDACTED if value else None
            elif isinstance(value, SLO):
                value = value.to_dict()
            elif isinstance(value, Lengths):
                value = value.source
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "url": str,
    "api_key": str,
    "model": str,
    "endpoint": one_of("completions", "chat"),
    "prompt_tokens": as_lengths,
    "output_tokens": as_lengths,
    "lockstep": as_bool,
    "dataset": str,
    "workload": as_workload,
    "shared_prefix_tokens": as_nonneg_int,
    "prefix_groups": as_positive_int,
    "turns": as_positive_int,
    "think_time": as_nonneg_duration,
    "trace": str,
    "time_scale": as_positive_float,
    "schedule": as_schedule,
    "seed": as_seed,
    "slo": parse_slo,
    "session_dir": str,
    "label": str,
    "concurrency": as_int_list,
    "rate": as_float_list,
    "max_concurrency": as_positive_int,
    "arrival": one_of("poisson", "gamma"),
    "step_duration": as_positive_duration,
    "step_requests": as_positive_int,
    "warmup": as_nonneg_duration,
    "ignore_eos": as_bool,
    "per_request_metrics": as_bool,
    "load_priority": one_of("realtime", "high", "normal"),
    "connect_timeout": as_positive_duration,
    "read_timeout": as_positive_duration,
    "stall_timeout": as_nonneg_duration,
    "ca_bundle": str,
    "insecure": as_bool,
    "max_event_bytes": parse_size_bytes,
    "metrics_timeout": as_positive_duration,
    "metrics_max_bytes": parse_size_bytes,
    "metrics_max_series": as_positive_int,
    "gpu_peak_tflops": as_positive_float,
}
"""Every settable key (file / env / CLI name) and how to read its value."""

_RENAMES = {
    "step_duration": "step_duration_s",
    "warmup": "warmup_s",
    "connect_timeout": "connect_timeout_s",
    "read_timeout": "read_timeout_s",
    "stall_timeout": "stall_timeout_s",
    "metrics_timeout": "metrics_timeout_s",
    "think_time": "think_time_s",
}


def config_path(environ: Mapping[str, str]) -> Path:
    """The default config file location (XDG)."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "infmon" / "config.toml"


def load_file_layer(path: Path, *, required: bool) -> dict[str, Any]:
    """Read the TOML config file into raw key → value (unknown keys are an error)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file not found: {path}") from None
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.__class__.__name__}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_PARSERS) - {"api_key_file"})
    if unknown:
        raise ConfigError(f"config file {path}: unknown key(s) {', '.join(unknown)}")
    return dict(data)


def load_env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """``INFMON_<KEY>`` variables, plus ``OPENAI_API_KEY`` as a fallback for the key."""
    layer: dict[str, Any] = {}
    if environ.get("OPENAI_API_KEY"):
        layer["api_key"] = environ["OPENAI_API_KEY"]
    for key in (*_PARSERS, "api_key_file"):
        value = environ.get(f"INFMON_{key.upper()}")
        if value not in (None, ""):
            layer[key] = value
    return layer


def read_api_key_file(path: str) -> str:
    """The first line of a key file (the key itself never appears in the error)."""
    try:
        key = Path(path).expanduser().read_text(encoding="utf-8").strip().splitlines()
    except (OSError, ValueError, RuntimeError) as exc:  # undecodable, a NUL, ~unknown-user
        raise ConfigError(f"cannot read API key file {path!r}: {exc.__class__.__name__}") from None
    if not key or not key[0].strip():
        raise ConfigError(f"API key file {path} is empty")
    return key[0].strip()


def build_config(
    cli: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    config_file: str | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> Config:
    """Merge defaults < file < env < CLI (only keys present and not None count).

    ``defaults`` are a command's own defaults (``quality`` asks the chat endpoint), below the
    file: the same layers then apply to every subcommand."""
    env = os.environ if environ is None else environ
    explicit = config_file or cli.get("config") or env.get("INFMON_CONFIG")
    path = Path(explicit).expanduser() if explicit else config_path(env)
    merged: dict[str, Any] = {}
    layers = (defaults or {}, load_file_layer(path, required=bool(explicit)), load_env_layer(env))
    for layer in (*layers, cli):
        for key, value in layer.items():
            if value is None:
                continue
            if key == "api_key_file":
                merged["api_key"] = read_api_key_file(str(value))
            elif key in _PARSERS:
                merged[key] = value
    return _to_config(merged, str(path))


def _to_config(raw: Mapping[str, Any], path: str) -> Config:
    kwargs: dict[str, Any] = {"config_file": path}
    for key, value in raw.items():
        try:
            parsed = _PARSERS[key](value)
        except ConfigError as exc:
            raise ConfigError(f"{key.replace('_', '-')}: {exc}") from None
        kwargs[_RENAMES.get(key, key)] = parsed
    if "seed" not in kwargs:
        kwargs["seed"] = secrets.randbelow(2**31)  # fresh prompts per run (recorded)
    if kwargs.get("url"):
        kwargs["url"] = normalise_url(kwargs["url"])
    return _checked(Config(**kwargs))


def _checked(c: Config) -> Config:
    """Options that cannot go together, said once, before anything runs."""
    if c.trace and c.schedule:
        raise ConfigError("--trace and --schedule both set the arrival times: give one")
    if c.shared_prefix_tokens and c.shared_prefix_tokens + 8 > c.prompt_tokens.upper:
        raise ConfigError(
            f"--shared-prefix-tokens {c.shared_prefix_tokens} leaves no room in --prompt-tokens "
            f"{c.prompt_tokens.source} (the prompt length includes the shared prefix)"
        )
    if c.dataset and c.workload not in ("corpus", c.dataset):
        raise ConfigError("--dataset and --workload FILE name two prompt sources: give one")
    return c


def normalise_url(url: str) -> str:
    """``host:8000`` → ``http://host:8000``; trailing ``/`` and ``/v1`` removed."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    scheme = url.split("://", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"URL must be http:// or https://, got {url!r}")
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url
