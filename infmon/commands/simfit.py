"""`infmon sim --fit SESSION_DIR…`: read recorded sessions into plain observations
(``infmon.commands.simfit_read``), fit the simulator's step costs to them (``infmon.sim.fit``),
print the residuals, write the profile; and `--predict --fitted FILE`: what-ifs on that server
with error bands.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infmon.commands import CliError
from infmon.commands.simfit_read import base_config, read_session
from infmon.commands.simfit_rounds import render_rounds

if TYPE_CHECKING:
    from infmon.sim.costmodel import FittedCost
    from infmon.sim.fit import FitResult
    from infmon.sim.forecast import Forecast, HeldOut
    from infmon.sim.growth import Growth
    from infmon.sim.levels import Shape
    from infmon.sim.roofline import EngineConfig

DEFAULT_PROFILE = "sim-profile.toml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("fit the simulator to a recorded server (--fit)")
    a = g.add_argument
    a(
        "--fit",
        action="append",
        default=[],
        type=Path,
        metavar="SESSION_DIR",
        help="a session "
        "of closed-loop bench steps (repeatable: another prompt length, a spec session)",
    )
    a(
        "--holdout",
        metavar="C,C…",
        help="leave the levels at these concurrencies out of the "
        "fit and report the forecast's error on them",
    )
    a(
        "--profile-out",
        type=Path,
        metavar="FILE",
        help=f"write the fitted profile here (default: {DEFAULT_PROFILE} in the first session)",
    )
    a(
        "--targets",
        choices=("auto", "both", "server", "client"),
        default="auto",
        help="whose TTFT and TPOT to fit: the server's own per-request timings (vLLM "
        "--enable-per-request-metrics: its engine clock, untouched by a busy client host), "
        "the client's streams, both, or auto (default: both "
        "where every step carries the server's, else the client's)",
    )
    a(
        "--shape-from",
        type=Path,
        metavar="FILE",
        help="with --fit: take how TPOT and the API server's wait grow with concurrency from "
        "this profile (a wider sweep of the same server) where the sessions' levels do not "
        "span enough to show it (four levels, the highest 8x the lowest)",
    )
    a(
        "--growth",
        choices=("auto", "rate", "line"),
        default="auto",
        help="with --fit: how the growth past levels that cannot show its shape is taken: "
        "auto (default: the levels' own shape where they span 8x, else --shape-from's, else "
        "rate), rate (the host's work per sequence and the API server's wait grow with the "
        "tokens streamed per second), or line (per sequence and per open stream)",
    )
    a("--fitted", type=Path, metavar="FILE", help="--predict on a fitted profile (--fit's)")
    a(
        "--draft-cost",
        type=float,
        metavar="C",
        help="with --fitted: a drafter whose pass costs "
        "C x the target's decode step (a what-if without a spec session)",
    )
    a(
        "--weights-ratio",
        type=float,
        metavar="R",
        help="with --fitted: weight bytes x R (FP8 weights: 0.5)",
    )
    a(
        "--compute-ratio",
        type=float,
        metavar="R",
        help="with --fitted: compute time per token x R (FP8 tensor cores: 0.5)",
    )


def _levels(text: str | None) -> set[int]:
    if not text:
        return set()
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise CliError(f"--holdout takes concurrencies like 16,64, not {text!r}") from None


# -- the fit ------------------------------------------------------------------------------
def run_fit(args: argparse.Namespace) -> int:
    from infmon.sim import fitio
    from infmon.sim.fit import FitError, fit
    from infmon.sim.forecast import holdout

    obs, servers = [], []
    for d in args.fit:
        late: list[str] = []
        o, server = read_session(d, args.targets, late)
        if late:
            print(
                f"{d}: left out {', '.join(late)}: the client self-check flagged their "
                "timestamps as late (a starved client measures its own waits)"
            )
        obs += o
        servers.append(server)
    if not obs:
        raise CliError("no closed-loop steps with TPOT, TTFT and tokens/s in these sessions")
    base = base_config(servers, args.max_num_seqs, args.max_num_batched_tokens)
    held = _levels(args.holdout)
    carried = carried_growth(args.shape_from)
    rate = {"auto": None, "rate": True, "line": False}[args.growth]
    try:
        result, left = (
            holdout(base, obs, held, carried, rate)
            if held
            else (fit(base, obs, carried=carried, rate=rate), [])
        )
    except FitError as exc:
        raise CliError(str(exc)) from None
    for line in render_fit(result):
        print(line)
    for line in render_holdout(left) + render_rounds(obs, left):
        print(line)
    out = args.profile_out or Path(args.fit[0]) / DEFAULT_PROFILE
    try:
        fitio.write(result.cost, out)
    except OSError as exc:
        raise CliError(f"profile not written to {out}: {exc.strerror}") from None
    print(f"profile: {out}")
    return 0


def carried_growth(path: Path | None) -> Growth | None:
    """The growth's shape of an earlier profile (``--shape-from``)."""
    from infmon.sim import fitio
    from infmon.sim.growth import Growth
    from infmon.sim.profiles import ProfileError

    if path is None:
        return None
    try:
        cost = fitio.load(path)
    except ProfileError as exc:
        raise CliError(str(exc)) from None
    lo, hi = cost.fitted_range.concurrency
    rate = cost.growth == "rate"
    return Growth(cost.seq_exponent, cost.stream_exponent, f"from {path} (c={lo}-{hi})", rate)


def render_growth(c: FittedCost) -> list[str]:
    """How the fit's growth with concurrency is shaped, and whence."""
    from infmon.model.base.sanitize import clean

    lo, hi = c.fitted_range.concurrency
    shape = f"host work per step ~ running ** {c.seq_exponent:.2f}, the API server's wait ~ " + (
        "ln c" if c.stream_exponent == 0 else f"(c ** {c.stream_exponent:.2f} - 1)"
    )
    if c.growth == "rate":
        shape = "with the tokens streamed per second (the rate form)"
    if c.shape_from:  # a profile is a file anyone may have written: shown escaped
        return [f"  growth with concurrency: {shape} ({clean(c.shape_from, 300)})"]
    if c.growth == "rate":
        return [
            f"  growth with concurrency: {shape}, assumed: levels c={lo}-{hi} cannot show "
            "whether it slows past them, and in this form it bends by as much as they grew "
            "(fitted so at c = 1, 2, 4, eight of ten sweeps of the real vLLM here read TPOT "
            "at c=8 and 16 within 16%; the line overshot by up to 32%). --shape-from a profile of a "
            "wider sweep of this server reads its shape instead; --growth line takes the line"
        ]
    return [
        f"  growth with concurrency: linear (--growth line, or a profile from before the rate "
        f"form: a forecast beyond c={lo}-{hi} takes the line, which on the real vLLM here "
        "overshot c=16 by 20-45%)"
    ]


def render_fit(result: FitResult) -> list[str]:
    from infmon.sim.costmodel import PARAMS, describe
    from infmon.sim.fit import SERIAL_MARGIN

    c = result.cost
    lines = [
        f"fitted {len(PARAMS)} costs in {result.iterations} iterations; "
        f"relative scatter {c.rms_rel:.1%}",
        "  TTFT and TPOT: "
        + {
            "server": "the server's own per-request timings (engine clock: queued → first "
            "token, mean inter-token time)",
            "client": "the client's streams (a busy client host makes them late: "
            "--targets server with vLLM's --enable-per-request-metrics)",
            "both": "the client's streams and the server's own per-request timings (their "
            "gap: the API server's, request_s and frontend_stream_s)",
        }.get(c.targets, c.targets),
    ]
    if result.api_scatter:
        each = ", ".join(f"{a} {x:.1%}" for a, x in result.api_scatter)
        how = (
            "one event loop: requests sent together are taken one after another"
            if c.api_server == "serial"
            else "each request's work its own, however many arrive together"
        )
        lines.append(
            f"  API server: {c.api_server} ({how}); scatter of each: {each} (serial is kept "
            f"when at least {1 - SERIAL_MARGIN:.0%} smaller)"
        )
    if c.wave_exponent < 1:
        hi = c.fitted_range.concurrency[1]
        lines.append(
            f"  closed-loop waves: c ** {c.wave_exponent:.2f} requests sent together (c={hi}: "
            f"{c.wave(hi)}), as the sessions' users bunched; the replay starts a level's users "
            "in waves of that size"
        )
    lines += render_growth(c)
    for i, name in enumerate(PARAMS):
        src = c.sources[i]
        if name in result.unseen:
            guess = c.value(name) * 1e3
            lines.append(f"  {name:16} {guess:12.6f} ms (no step used it: a guess, not fitted)")
            continue
        if name in result.held_at_zero:
            up = 1.96 * c.stderr(name) * 1e3
            lines.append(
                f"  {name:16} {0.0:12.6f} ms (held at 0: the data asked for less; "
                f"95% band up to {up:.6f})"
            )
            continue
        if not src:
            lines.append(f"  {name:16} {'-':>22} (not fitted: no session of that kind)")
            continue
        v, se = c.value(name), c.stderr(name)
        rel = f"{se / v:.0%}" if v > 0 else "n/a"
        lines.append(
            f"  {name:16} {v * 1e3:12.6f} ms ± {se * 1e3:.6f} ({rel})  {describe(name, c.growth)}"
        )
    if c.acceptance:
        lines.append(
            f"  acceptance per position (given the earlier ones): "
            f"{', '.join(f'{a:.3f}' for a in c.acceptance)}"
        )
    lines.append("residuals per step (fitted / measured - 1):")
    rows: dict[int, dict[str, Any]] = {}
    for r in result.residuals:
        rows.setdefault(id(r.observation), {"o": r.observation})[r.figure] = r
    shown = [(f, h, s) for f, h, s in RESIDUAL_COLUMNS if any(f in row for row in rows.values())]
    lines.append(
        "  session                 c  prompt output" + "".join(f"  {h:>15}" for _, h, _ in shown)
    )
    for row in rows.values():
        o = row["o"]
        cells = [
            f"{row[f].measured * s:8.2f} {row[f].relative:+6.1%}" if f in row else " " * 15
            for f, _, s in shown
        ]
        lines.append(
            f"  {o.session[:20]:20} {o.concurrency:4} {o.prompt_tokens:7.0f} "
            f"{o.output_tokens:6.0f}  " + "  ".join(cells)
        )
    return lines


RESIDUAL_COLUMNS = (
    ("tpot", "TPOT ms", 1e3),
    ("ttft", "TTFT ms", 1e3),
    ("tok_s", "tok/s", 1.0),
    ("server_tpot", "server TPOT ms", 1e3),
    ("server_ttft", "srv queue→1st", 1e3),
    ("server_prefill", "srv prefill ms", 1e3),
)
"""The residual table's columns: figure, header, scale."""


def render_holdout(left: list[HeldOut]) -> list[str]:
    if not left:
        return []
    lines = ["held out (forecast from the other levels; error and whether inside the 95% band):"]
    for h in left:
        err, inside = h.errors(), h.inside_band()
        cells = "  ".join(f"{k} {err[k]:+.1%}{'' if inside[k] else ' (outside band)'}" for k in err)
        lines.append(f"  c={h.observation.concurrency} {h.observation.session}: {cells}")
    return lines


# -- what-ifs on a fitted server ------------------------------------------------------------
def fitted_cost(args: argparse.Namespace) -> FittedCost:
    """The fitted profile with the asked what-ifs applied (weights, compute, a drafter)."""
    from infmon.sim import fitio
    from infmon.sim.profiles import ProfileError

    try:
        cost = fitio.load(args.fitted)
    except ProfileError as exc:
        raise CliError(str(exc)) from None
    factors = {}
    if args.weights_ratio is not None:
        factors["weights_s"] = args.weights_ratio
    if args.compute_ratio is not None:
        factors["compute_token_s"] = args.compute_ratio
    if factors:
        cost = cost.scaled(factors)
    if args.draft_cost is not None:
        c = args.draft_cost
        fixed = cost.value("step_s") + cost.value("weights_s")
        cost = cost.with_values({"draft_pass_s": c * fixed, "draft_seq_s": c * cost.value("seq_s")})
    return cost


def _shape(args: argparse.Namespace, cost: FittedCost, concurrency: int, k: int) -> Shape:
    from infmon.sim.levels import Shape
    from infmon.sim.spec import expand_acceptance

    r = cost.fitted_range
    prompt = args.prompt_tokens or round(sum(r.prompt_tokens) / 2)
    output = args.output_tokens or round(sum(r.output_tokens) / 2)
    acc: tuple[float, ...] = ()
    if k:
        acc = expand_acceptance(tuple(args.acceptance) if args.acceptance else cost.acceptance, k)
    return Shape(concurrency, prompt, output, k, acc, output_spread=round(r.output_spread * output))


def run_predict(args: argparse.Namespace) -> int:
    from infmon.sim.fit import with_cost
    from infmon.sim.forecast import forecast

    cost = fitted_cost(args)
    k = args.speculative_k if args.speculative_k is not None else 0
    if k and not (cost.value("draft_pass_s") or cost.value("draft_seq_s")):
        raise CliError("a drafter what-if needs --draft-cost C or a spec session in the fit")
    if k and not (args.acceptance or cost.acceptance):
        raise CliError("a drafter what-if needs --acceptance (no spec session in the fit)")
    base = with_cost(base_config([], args.max_num_seqs, args.max_num_batched_tokens), cost)
    if args.max_num_seqs:
        base = replace(base, max_num_seqs=args.max_num_seqs)
    if args.max_num_batched_tokens:
        base = replace(base, max_num_batched_tokens=args.max_num_batched_tokens)
    if args.break_even:
        return _break_even(args, base, cost, k)
    if args.concurrency is None:
        raise CliError("--predict --fitted needs --concurrency N (or --break-even)")
    f = forecast(base, cost, _shape(args, cost, args.concurrency, k))
    for line in render_forecast(f):
        print(line)
    return 0


def render_forecast(f: Forecast) -> list[str]:
    s = f.shape
    spec = f", spec k={s.speculative_k}" if s.speculative_k else ""
    spread = f" ± {s.output_spread}" if s.output_spread else ""
    lines = [
        f"fitted server, c={s.concurrency}, prompt {s.prompt_tokens}, output "
        f"{s.output_tokens}{spread}{spec} (95% band):",
        f"  TPOT ms       {f.tpot_s.text(1e3)}",
        f"  TTFT ms p50   {f.ttft_p50_s.text(1e3)}   mean {f.ttft_mean_s.text(1e3)}",
        f"    from the scheduler's queue (as vLLM's per-request timings count it): p50 "
        f"{f.queue_ttft_p50_s.text(1e3)}   mean {f.queue_ttft_mean_s.text(1e3)}",
        f"  output tok/s  {f.output_tok_s.text(1.0, 1)}",
        f"  largest batch {f.batch_max}; preemptions {f.preemptions}",
    ]
    lines += [f"  outside the fitted range: {why}" for why in f.outside]
    return lines


def _break_even(args: argparse.Namespace, base: EngineConfig, cost: FittedCost, k: int) -> int:
    from infmon.sim.spec_fit import break_even

    if not k:
        raise CliError("--break-even needs --speculative-k K")
    shape = _shape(args, cost, 1, k)
    be = break_even(base, cost, shape)
    for line in be.lines():
        print(line)
    return 0
