"""Options shared by every command that drives load (monitor, bench, demo, quality).

Every option defaults to ``None`` here so that ``infmon.config.build_config`` can tell
"not given on the command line" from a value, and apply CLI > env > file > defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from infmon.cli import CliError
from infmon.clock import Clock, wall_time
from infmon.config import Config, ConfigError, build_config
from infmon.journal import JournalWriter
from infmon.load.prompts import DatasetError, Workload, load_dataset

_LOAD_KEYS = (
    "url", "api_key", "api_key_file", "model", "endpoint", "prompt_tokens", "output_tokens",
    "dataset", "seed", "slo", "session_dir", "label", "concurrency", "rate", "max_concurrency",
    "arrival", "step_duration", "step_requests", "warmup", "ignore_eos", "connect_timeout",
    "read_timeout", "ca_bundle", "insecure",
)  # fmt: skip


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the common load options (the command adds its own positional URL)."""
    g = parser.add_argument_group("server and load")
    g.add_argument("--api-key", help="API key (default: $INFMON_API_KEY, then $OPENAI_API_KEY)")
    g.add_argument("--api-key-file", metavar="FILE", help="read the API key from FILE")
    g.add_argument("--model", help="model name (default: the first model of /v1/models)")
    g.add_argument("--endpoint", choices=("completions", "chat"), help="API (default completions)")
    g.add_argument("--prompt-tokens", metavar="N", help="synthetic prompt length (default 128)")
    g.add_argument("--output-tokens", metavar="N|A-B", help="output length, fixed or a range (default 128)")
    g.add_argument("--dataset", metavar="FILE", help="prompts: JSONL with prompt or messages, or ShareGPT JSON")
    g.add_argument("--seed", help="seed for prompts, lengths and arrivals (default 0)")
    g.add_argument("--slo", metavar="SPEC", help="e.g. ttft=500ms,tpot=50ms,e2el=10s (goodput, SLO limit)")
    g.add_argument("--session-dir", metavar="DIR", help="session record (default ./infmon-sessions/<UTC time>-<label>/)")
    g.add_argument("--label", help="name of this run (default run)")
    g.add_argument("--concurrency", metavar="N[,N…]", help="closed loop: concurrent streams per step")
    g.add_argument("--rate", metavar="R[,R…]", help="open loop: requests/s per step")
    g.add_argument("--max-concurrency", metavar="N", help="cap on in-flight requests in rate mode (default 256)")
    g.add_argument("--arrival", choices=("poisson", "gamma"), help="open-loop arrivals (default poisson)")
    g.add_argument("--step-duration", metavar="DUR", help="measured time per step, e.g. 20s (default 20s)")
    g.add_argument("--step-requests", metavar="N", help="also end a step after N measured requests")
    g.add_argument("--warmup", metavar="DUR", help="warm-up per step, excluded (default 10%% of the step)")
    g.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=None,
                   help="pin output length with ignore_eos/min_tokens where the server accepts them (default on)")  # fmt: skip
    g.add_argument("--connect-timeout", metavar="DUR", help="TCP/TLS connect timeout (default 10s)")
    g.add_argument("--read-timeout", metavar="DUR", help="longest stall between two reads of a stream (default 600s; no total timeout)")  # fmt: skip
    g.add_argument("--ca-bundle", metavar="FILE", help="CA bundle for TLS verification")
    g.add_argument("--insecure", action="store_true", default=None, help="do not verify TLS certificates (warns)")
    g.add_argument("--config", metavar="FILE", help="TOML config file (default $XDG_CONFIG_HOME/infmon/config.toml)")


def cli_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The options the operator actually gave, as config keys."""
    values = vars(args)
    layer = {key: values.get(key) for key in _LOAD_KEYS if values.get(key) is not None}
    if values.get("config"):
        layer["config"] = values["config"]
    return layer


def config_from_args(args: argparse.Namespace) -> Config:
    """Build the frozen Config (CLI > env > file > defaults); operator errors become CliError."""
    try:
        config = build_config(cli_layer(args))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if config.insecure:
        print("infmon: warning: TLS certificate verification is OFF (--insecure)", file=sys.stderr)
    return config


def make_workload(config: Config) -> Workload:
    """The config's prompts: a dataset file when given, else synthetic prompts."""
    try:
        prompts = load_dataset(config.dataset) if config.dataset else None
        return Workload(prompt_tokens=config.prompt_tokens,
                        output_tokens=(config.output_tokens_min, config.output_tokens_max),
                        prompts=prompts, seed=config.seed)  # fmt: skip
    except DatasetError as exc:
        raise CliError(str(exc)) from None


def default_session_dir(label: str, now_s: float | None = None) -> Path:
    """``./infmon-sessions/<UTC time>-<label>/`` (a suffix is added if it exists)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall_time() if now_s is None else now_s))
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label) or "run"
    base = Path("infmon-sessions") / f"{stamp}-{safe}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def open_journal(directory: Path, clock: Clock) -> JournalWriter:
    """The session record of a run (append-only, flushed in the background)."""
    try:
        return JournalWriter(directory, clock)
    except OSError as exc:
        raise CliError(f"cannot create session directory {directory}: {exc.strerror}") from None


def write_session_reports(directory: Path) -> None:
    """Rebuild the session's reports; a failure is reported on one line, never a traceback."""
    from infmon.report import write_reports

    try:
        written = write_reports(directory)
    except Exception as exc:  # a report bug must not turn a finished run into a crash
        print(f"infmon: warning: reports not written ({exc.__class__.__name__}: {exc})", file=sys.stderr)
        return
    names = ", ".join(p.name for p in written if p.suffix in (".md", ".html"))
    print(f"reports: {names} in {directory}", flush=True)
