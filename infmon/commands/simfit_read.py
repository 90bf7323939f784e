"""Recorded sessions into the fit's typed observations, and the recorded server's limits.

The simulator stands alone (it imports no other infmon package), so reading a session (its
journal and report document) into plain ``Observation``s and ``ServerLimits`` happens here, on
the commands side: ``infmon sim --fit`` (``infmon.commands.simfit``) and the bench scripts that
refit recorded sweeps read sessions through ``read_session`` and ``base_config``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infmon.commands import CliError

if TYPE_CHECKING:
    from infmon.sim.observation import Observation
    from infmon.sim.roofline import EngineConfig


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _acceptance(session_dir: Path) -> tuple[float, ...]:
    """Mean per-position acceptance over the session's scrapes (vLLM's per-position counters)."""
    from infmon.journal.reader import SessionReader

    rows: list[list[float]] = []
    with SessionReader(session_dir) as reader:
        for line in reader.iter_scrapes():
            spec = (line.get("snap") or {}).get("spec_decode") or {}
            per_pos = [v for v in spec.get("acceptance_per_position") or [] if _num(v) is not None]
            if per_pos:
                rows.append([float(v) for v in per_pos])
    if not rows:
        return ()
    k = max(len(r) for r in rows)
    rows = [r for r in rows if len(r) == k]
    return tuple(sum(r[i] for r in rows) / len(rows) for i in range(k))


SERVER_SHARE = 0.9
"""A step's TTFT and TPOT come from the server's per-request timings only when at least this
share of its measured requests carried them (the rest: a server without the flag, an error)."""


@dataclass(frozen=True, slots=True)
class ServerTimed:
    """One step's TTFT and TPOT as the server timed its requests (seconds)."""

    ttft_mean_s: float
    ttft_p50_s: float
    tpot_mean_s: float
    prefill_mean_s: float  # scheduled → first token (the step that prefilled it)


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the fit reads from a session's requests, beside its report's steps."""

    timed: dict[int, ServerTimed]
    """Per step: the server's own timings (only steps that carried them)."""
    waves: dict[int, float]
    """Per step: the closed loop's wave size (requests sent together)."""
    output_spread: int
    """The session's output lengths' half-range in tokens (0: every output alike)."""


def _step_facts(session_dir: Path, timed: bool) -> StepFacts:
    """Per step, from its measured requests: the server's own per-request figures when
    ``timed`` (vLLM ``--enable-per-request-metrics``; the anatomy's ``split_columns``): TTFT =
    queued → first token, TPOT = its mean inter-token time; steps where under ``SERVER_SHARE``
    of the measured requests carried them are left out. And the closed loop's wave size
    (``infmon.model.records.waves``); with them, the spread of the session's output lengths
    (one workload for every step: read over all of them, so rounds of a level replay alike)."""
    import numpy as np

    from infmon.journal.reader import SessionReader
    from infmon.model.records.anatomy import split_columns
    from infmon.model.records.waves import step_wave
    from infmon.sim.levels import output_spread

    out, waves, lengths = {}, {}, []
    with SessionReader(session_dir) as reader:
        for step, cols in reader.iter_step_columns():
            measured = cols.take(~cols.warmup)
            waves[step] = step_wave(measured)
            n = measured.output_token_count
            lengths.append(n[(measured.error_code == 0) & (n >= 1)])
            if not timed:
                continue
            split = split_columns(measured)
            firsts = (split.queue + split.prefill) / 1e3
            pers = split.server_itl[~np.isnan(split.server_itl)] / 1e3  # 1-token outputs: none
            if len(firsts) >= SERVER_SHARE * (len(firsts) + split.without) and len(pers) >= 2:
                out[step] = ServerTimed(
                    float(firsts.mean()),
                    float(np.median(firsts)),
                    float(pers.mean()),
                    float(split.prefill.mean() / 1e3),
                )
    done = np.concatenate(lengths) if lengths else np.zeros(0)
    return StepFacts(out, waves, output_spread(done, float(done.mean()) if len(done) else 0.0))


def _client_step(session: str, st: Mapping[str, Any]) -> tuple[int, Observation] | None:
    """One closed-loop step of a report document as the client measured it (None: not one)."""
    from infmon.sim.observation import Observation

    c, done = st.get("concurrency"), st.get("completed") or 0
    prompt, output = _num(st.get("prompt_tokens")), _num(st.get("output_tokens"))
    ttft_ms = st.get("ttft_ms") or {}
    tpot, ttft = _num((st.get("tpot_ms") or {}).get("mean")), _num(ttft_ms.get("mean"))
    p50, tok_s = _num(ttft_ms.get("p50")), _num(st.get("output_throughput_tok_s"))
    if (
        not c
        or done < 2
        or prompt is None
        or output is None
        or tpot is None
        or ttft is None
        or tok_s is None
    ):
        return None
    obs = Observation(
        session=session,
        concurrency=int(c),
        prompt_tokens=prompt / done,
        output_tokens=output / done,
        tpot_s=tpot / 1e3,
        ttft_s=ttft / 1e3,
        output_tok_s=tok_s,
        ttft_p50_s=p50 / 1e3 if p50 is not None else math.nan,
    )
    return int(st.get("step") or 0), obs


def read_session(
    session_dir: Path, targets: str = "auto", left_out: list[str] | None = None
) -> tuple[list[Observation], ServerLimits]:
    """The session's closed-loop steps as observations, and its server's limits. ``targets``:
    whose TTFT and TPOT (``auto``: the server's when every step carries them, else the
    client's; ``server``: a step without them is an error). A step the client self-check
    flagged (timestamps late: a starved client) is left out and named in ``left_out``: its
    figures are the client's own waits, and its load what a starved client could send."""
    from infmon.journal import JournalReadError, is_session_dir
    from infmon.report import build_summary

    if not is_session_dir(session_dir):
        raise CliError(f"{session_dir}: not a session directory")
    try:
        doc = build_summary(session_dir)
        facts = _step_facts(session_dir, targets != "client")
    except JournalReadError as exc:
        raise CliError(str(exc)) from None
    name = Path(session_dir).name
    acceptance = _acceptance(session_dir)
    late = [st for st in doc["steps"] if st.get("client_late")]
    if left_out is not None:
        left_out += [f"step {st.get('step')} (c={st.get('concurrency')})" for st in late]
    steps = [
        row
        for st in doc["steps"]
        if not st.get("client_late") and (row := _client_step(name, st)) is not None
    ]
    server = bool(steps) and all(step in facts.timed for step, _ in steps)
    if targets in ("server", "both") and not server:
        raise CliError(
            f"{session_dir}: --targets {targets}, but not every step carries the server's "
            "per-request timings (start vLLM with --enable-per-request-metrics)"
        )
    out = []
    for step, seen in steps:
        srv = facts.timed[step] if server else None
        o = seen
        if srv is not None and targets == "server":
            o = replace(
                seen,
                tpot_s=srv.tpot_mean_s,
                ttft_s=srv.ttft_mean_s,
                ttft_p50_s=srv.ttft_p50_s,
                source="server",
            )
        elif srv is not None:  # both: the client's, and the engine's under them
            o = replace(
                seen,
                server_tpot_s=srv.tpot_mean_s,
                server_ttft_s=srv.ttft_mean_s,
                server_prefill_s=srv.prefill_mean_s,
                source="both",
            )
        out.append(
            replace(
                o,
                speculative_k=len(acceptance),
                acceptance=acceptance,
                arrival_wave=facts.waves.get(step, math.nan),
                output_spread=facts.output_spread,
                step=step,
            )
        )
    return out, ServerLimits.of(doc["server"])


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What a session recorded of its server's limits (vLLM's ``cache_config_info`` and the
    model's length; None where the server did not say): the replay's KV capacity."""

    kv_num_gpu_blocks: int | None = None
    block_size: int | None = None
    max_model_len: int | None = None

    @classmethod
    def of(cls, server: Mapping[str, Any]) -> ServerLimits:
        """From a report document's ``server`` section (a count that is not a positive number:
        unknown)."""

        def count(key: str) -> int | None:
            v = _num(server.get(key))
            return int(v) if v is not None and v >= 1 else None

        return cls(
            count("kv_num_gpu_blocks"), count("kv_block_size_tokens"), count("max_model_len")
        )


def base_config(
    servers: Sequence[ServerLimits],
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> EngineConfig:
    """The fitted server's limits: KV blocks, block size and model length from the first
    session that recorded each, the scheduler's from flags (the simulator's defaults without)."""
    from infmon.sim.scenarios import SCENARIOS, build_config

    blocks = next((s.kv_num_gpu_blocks for s in servers if s.kv_num_gpu_blocks), None)
    block = next((s.block_size for s in servers if s.block_size), 16)
    max_len = next((s.max_model_len for s in servers if s.max_model_len), 32768)
    cfg = build_config(SCENARIOS["baseline"], max_model_len=max_len)
    return replace(
        cfg,
        num_gpu_blocks=blocks,
        block_size=block,
        max_num_seqs=max_num_seqs or cfg.max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens or cfg.max_num_batched_tokens,
        enable_prefix_caching=False,
    )
