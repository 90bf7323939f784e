"""Speculative decoding in the one vocabulary: acceptance α per position (with the measured
per-position bars) and the mean acceptance length, ITL against TPOT, and per level held: α,
the mean length and the stream's tokens per chunk, and against the baseline the speed-up and
the break-even α. Shown only when the server does speculative decoding."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.compare.baseline import SpecLevel
from infmon.model.compare.spec_econ import alpha_for_tokens
from infmon.model.live.dashboard import SpecView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

MODEL_LINE = "L=(1−α^(k+1))/(1−α): 1 target+k draft passes"


@dataclass(frozen=True)
class SpecInput:
    spec: SpecView | None
    itl_p50_s: float
    tpot_p50_s: float


class SpecPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Spec decoding"
        yield Body()

    def watch_snapshot(self, s: SpecInput) -> None:
        self.display = s.spec is not None
        if s.spec is None:
            return
        muted = self.style("muted")
        ratio = (
            s.itl_p50_s / s.tpot_p50_s
            if not (f.missing(s.itl_p50_s) or f.missing(s.tpot_p50_s) or s.tpot_p50_s == 0)
            else float("nan")
        )
        k = len(s.spec.per_position_acceptance)
        alpha = alpha_for_tokens(s.spec.mean_acceptance_length, k) if k else float("nan")
        text = Text.assemble(
            ("acceptance α ", muted),
            (f.num(alpha, 2), "bold"),
            (" per position ", muted),
            (f.blocks(s.spec.per_position_acceptance), self.style("accent")),
            "\n",
            ("mean acceptance length ", muted),
            (f.num(s.spec.mean_acceptance_length, 2), "bold"),
            (f" (k={k})" if k else "", muted),
            "\n",
            ("ITL ", muted),
            f.ms(s.itl_p50_s),
            (" ≈ ", muted),
            f.num(ratio, 1),
            (" × TPOT ", muted),
            f.ms(s.tpot_p50_s),
        )
        levels, height = s.spec.levels, self.content_size.height or 12
        room = height - 4  # the three lines above, the model line below
        versus = any(lv.economics is not None for lv in levels)
        if versus and _lines(levels) > room:  # short: the break-even before the other lines
            text, room = text.split("\n")[0], height - 1
        while levels and _lines(levels) > room:
            levels = levels[1:]  # the latest levels that fit
        for level in levels:
            self._level(text, level)
        if versus and len(text.plain.splitlines()) + 1 <= height:
            text.append(f"\n{MODEL_LINE}", muted)
        self.query_one(Body).show(text)

    def _level(self, text: Text, lv: SpecLevel) -> None:
        """``c=16  α 0.12  mean length 1.14  1.1 tokens/chunk``, then against the baseline
        ``3.4× slower · break-even α≥0.71, has α 0.12``."""
        muted = self.style("muted")
        text.append(f"\n{lv.label:<5}", self.style("primary", True))
        text.append(f"α {f.num(lv.alpha, 2)}  mean length {f.num(lv.mean_length, 2)}", "bold")
        if (self.content_size.width or 0) >= 46:
            text.append(f"  {f.num(lv.tokens_per_chunk, 1)} tokens/chunk", muted)
        e = lv.economics
        if e is not None:
            speed = f"{e.speedup:.1f}× faster" if e.pays else f"{1 / e.speedup:.1f}× slower"
            be = e.breakeven_alpha
            need = f"break-even α≥{be:.2f}" if not f.missing(be) else "no α pays"
            has = f"α {e.alpha:.2f}" if not f.missing(e.alpha) else "α ?"
            style = self.style("success" if e.pays else "error", True)
            text.append(f"\n  {speed} · {need}, has {has}", style)


def _lines(levels: tuple[SpecLevel, ...]) -> int:
    """Lines the levels take: one each, two with the baseline's break-even."""
    return sum(2 if lv.economics is not None else 1 for lv in levels)
