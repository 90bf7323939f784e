"""A fitted server as a TOML profile: every number with its standard error and its sessions."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from infmon.sim.costmodel import (
    API_SERVERS,
    GROWTHS,
    NONE_UNLESS_FITTED,
    PARAMS,
    FittedCost,
    FittedRange,
    describe,
)
from infmon.sim.profiles import ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KIND = "infmon.fitted-server/1"


def _toml_str(s: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped and a lone
    surrogate (a path's undecodable byte) replaced, so the profile stays valid TOML and the
    text comes back as written."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\u{o:04x}")
        elif 0xD800 <= o <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _num(x: float) -> str:
    return repr(float(x)) if math.isfinite(x) else "nan"


def dumps(cost: FittedCost) -> str:
    r = cost.fitted_range
    lines = [
        "# infmon sim --fit: this server's step costs, fitted to its recorded sessions",
        f"kind = {_toml_str(KIND)}",
        f"rms_rel = {_num(cost.rms_rel)}  # the fit's relative scatter",
        f"targets = {_toml_str(cost.targets)}  # whose TTFT and TPOT: client streams or the"
        " server's per-request timings",
        f"api_server = {_toml_str(cost.api_server)}  # its work per request: concurrent, or"
        " serial (one event loop takes requests one after another)",
        f"wave_exponent = {_num(cost.wave_exponent)}  # a closed loop of c users sends in waves"
        " of c ** this (1.0: all together)",
        f"seq_exponent = {_num(cost.seq_exponent)}  # host work per step grows as running **"
        " this (1.0: a fixed cost per sequence)",
        f"stream_exponent = {_num(cost.stream_exponent)}  # the API server's wait grows as"
        " (c ** this - 1) / this (1.0: c - 1; 0: ln c)",
        f"growth = {_toml_str(cost.growth)}  # line: per sequence and per stream, bent by the"
        " exponents; rate: with the tokens streamed per second",
        f"shape_from = {_toml_str(cost.shape_from)}  # whence the shape (empty: not read from"
        " levels, assumed)",
        "",
        "[server]  # limits as the sessions recorded them (KV from cache_config_info)",
        f"kv_capacity_tokens = {cost.kv_capacity_tokens}",
        f"block_size = {cost.block_size}",
        f"max_model_len = {cost.max_model_len}",
        f"max_num_seqs = {cost.max_num_seqs}",
        f"max_num_batched_tokens = {cost.max_num_batched_tokens}",
        "",
        "[range]  # what the fit saw",
        f"concurrency = [{r.concurrency[0]}, {r.concurrency[1]}]",
        f"prompt_tokens = [{_num(r.prompt_tokens[0])}, {_num(r.prompt_tokens[1])}]",
        f"output_tokens = [{_num(r.output_tokens[0])}, {_num(r.output_tokens[1])}]",
        f"batch_max = {r.batch_max}",
        f"spec_k = [{', '.join(map(str, r.spec_k))}]",
        f"output_spread = {_num(r.output_spread)}  # output lengths' half-range over their mean"
        " (0: all alike)",
        "",
        "[spec]",
        f"speculative_k = {cost.speculative_k}",
        f"acceptance = [{', '.join(_num(a) for a in cost.acceptance)}]  # per position, given the"
        " earlier ones",
    ]
    for name in PARAMS:
        lines += [
            "",
            f"[params.{name}]  # {describe(name, cost.growth)}",
            f"value = {_num(cost.value(name))}",
            f"stderr = {_num(cost.stderr(name))}",
            f"sessions = {_toml_str(cost.sources[PARAMS.index(name)])}",
        ]
    rows = ", ".join("[" + ", ".join(_num(x) for x in row) + "]" for row in cost.cov)
    lines += ["", "[covariance]", f"order = [{', '.join(map(_toml_str, PARAMS))}]"]
    lines += [f"matrix = [{rows}]", ""]
    return "\n".join(lines)


def write(cost: FittedCost, path: Path) -> None:
    path.write_text(dumps(cost), encoding="utf-8")


def _get(doc: dict[str, Any], where: str, *keys: str) -> Any:
    cur: Any = doc
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            raise ProfileError(f"{where}: fitted profile lacks {'.'.join(keys)}")
        cur = cur[k]
    return cur


def _covariance(
    order: list[str], matrix: list[list[float]], where: str
) -> tuple[tuple[float, ...], ...]:
    """The covariance over ``PARAMS`` from the file's own ``order`` (zero for a cost it lacks)."""
    if len(matrix) != len(order) or any(len(row) != len(order) for row in matrix):
        raise ProfileError(f"{where}: fitted profile's covariance is not {len(order)} square")
    at = {str(n): i for i, n in enumerate(order)}
    return tuple(
        tuple(float(matrix[at[a]][at[b]]) if a in at and b in at else 0.0 for b in PARAMS)
        for a in PARAMS
    )


def load(path: Path) -> FittedCost:
    where = str(path)
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"cannot read fitted profile {where}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"fitted profile {where} is not valid TOML: {exc}") from None
    if doc.get("kind") != KIND:
        raise ProfileError(f"{where}: not a fitted profile (kind {KIND!r} expected)")
    try:
        rng = FittedRange(
            concurrency=tuple(_get(doc, where, "range", "concurrency")),  # type: ignore[arg-type]
            prompt_tokens=tuple(_get(doc, where, "range", "prompt_tokens")),  # type: ignore[arg-type]
            output_tokens=tuple(_get(doc, where, "range", "output_tokens")),  # type: ignore[arg-type]
            batch_max=int(_get(doc, where, "range", "batch_max")),
            spec_k=tuple(int(k) for k in _get(doc, where, "range", "spec_k")),
            output_spread=_spread(_get(doc, where, "range"), where),
        )
        server = _get(doc, where, "server")
        params = _get(doc, where, "params")
        values, sources = [], []
        for n in PARAMS:
            if n in NONE_UNLESS_FITTED and n not in params:  # a profile from before it
                values.append(0.0)
                sources.append("")
                continue
            values.append(float(_get(doc, where, "params", n, "value")))
            sources.append(str(_get(doc, where, "params", n, "sessions")))
        return FittedCost(
            values=tuple(values),
            cov=_covariance(
                _get(doc, where, "covariance", "order"),
                _get(doc, where, "covariance", "matrix"),
                where,
            ),
            sources=tuple(sources),
            rms_rel=float(_get(doc, where, "rms_rel")),
            targets=str(doc.get("targets", "client")),
            api_server=_choice(doc, "api_server", API_SERVERS, where),
            wave_exponent=_exponent(doc, "wave_exponent", where),
            seq_exponent=_exponent(doc, "seq_exponent", where),
            stream_exponent=_exponent(doc, "stream_exponent", where),
            growth=_choice(doc, "growth", GROWTHS, where),
            shape_from=str(doc.get("shape_from", "")),
            fitted_range=rng,
            acceptance=tuple(float(a) for a in _get(doc, where, "spec", "acceptance")),
            speculative_k=int(_get(doc, where, "spec", "speculative_k")),
            kv_capacity_tokens=int(server["kv_capacity_tokens"]),
            block_size=int(server["block_size"]),
            max_model_len=int(server["max_model_len"]),
            max_num_seqs=int(server["max_num_seqs"]),
            max_num_batched_tokens=int(server["max_num_batched_tokens"]),
        )
    except ProfileError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"{where}: fitted profile is malformed ({exc})") from None


def _choice(doc: dict[str, object], name: str, choices: tuple[str, ...], where: str) -> str:
    """A profile's API server shape or growth form; a profile from before the choice has the
    first (concurrent, line)."""
    value = doc.get(name, choices[0])
    if value not in choices:
        raise ProfileError(f"{where}: {name} is {value!r}, not one of {', '.join(choices)}")
    return str(value)


def _spread(rng: object, where: str) -> float:
    """The range's output spread; a profile from before it has none (lengths all alike)."""
    value = rng.get("output_spread", 0.0) if isinstance(rng, dict) else 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ProfileError(f"{where}: range.output_spread is {value!r}, not a number from 0 to 1")
    return float(value)


def _exponent(doc: dict[str, object], name: str, where: str) -> float:
    """A profile's exponent of waves or growth; one from before it has 1.0 (every user
    together, a linear growth)."""
    value = doc.get(name, 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ProfileError(f"{where}: {name} is {value!r}, not a number from 0 to 1")
    return float(value)
