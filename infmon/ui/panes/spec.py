"""Speculative decoding: acceptance, mean acceptance length, per-position bars, ITL vs TPOT.
Shown only when the server does speculative decoding."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.dashboard import SpecView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane


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
        text = Text.assemble(
            ("acceptance ", muted),
            (f.pct(s.spec.acceptance_rate), "bold"),
            ("  mean length ", muted),
            (f.num(s.spec.mean_acceptance_length, 1), "bold"),
            "\n",
            ("per position ", muted),
            (f.blocks(s.spec.per_position_acceptance), self.style("accent")),
            "\n",
            ("ITL ", muted),
            f.ms(s.itl_p50_s),
            (" ≈ ", muted),
            f.num(ratio, 1),
            (" × TPOT ", muted),
            f.ms(s.tpot_p50_s),
        )
        self.query_one(Body).show(text)
