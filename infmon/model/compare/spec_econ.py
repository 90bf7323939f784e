"""When does speculative decoding pay? The break-even acceptance, from measured step costs.

The model (the standard one for draft-and-verify decoding):

- A speculative engine step runs **k draft passes and one target pass over k + 1 tokens**.
- With per-position acceptance ``α`` (each draft token accepted, given the earlier ones were,
  with probability α) a step yields ``(1 − α^(k+1)) / (1 − α)`` tokens per sequence (k + 1 at
  α = 1, 1 at α = 0). The server's mean acceptance length ``L = 1 + accepted / drafts`` is that
  figure measured, so the α a run *has* is the one whose tokens per step equal its ``L``.
- Step costs come from the measured figures at one concurrency: a spec step takes
  ``TPOT × L`` (each step moves every sequence L tokens), a baseline step takes the baseline's
  TPOT (one token). Spec decoding matches the baseline when its tokens per step reach
  ``spec step / baseline step``: the **break-even** α solves
  ``(1 − α^(k+1)) / (1 − α) = TPOT_spec × L / TPOT_base``. When that ratio exceeds k + 1, no
  acceptance can pay (the drafter costs more than k + 1 target tokens are worth).
- If verifying k + 1 tokens costs about one baseline step (decode is memory-bound), each draft
  pass costs ``(TPOT_spec × L − TPOT_base) / k``: the drafter's price, stated as an estimate.

Pure (no numpy): the live pane, bench and compare call the same functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infmon.model.base.units import latency_text

MODEL = (
    "spec step = 1 target pass over k+1 tokens + k draft passes; tokens per step "
    "(1 − α^(k+1))/(1 − α) at per-position acceptance α; step cost = TPOT × mean acceptance "
    "length, baseline step = baseline TPOT at the same concurrency"
)


def tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens one spec step yields per sequence at per-position acceptance ``alpha``."""
    if k < 1 or not 0.0 <= alpha <= 1.0:
        return math.nan
    if alpha >= 1.0 - 1e-12:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_for_tokens(tokens: float, k: int) -> float:
    """The α at which a step yields ``tokens`` (the inverse of ``tokens_per_step``); nan when
    ``tokens`` is outside [1, k + 1] (no acceptance gives it)."""
    if k < 1 or not math.isfinite(tokens) or tokens < 1.0 - 1e-9 or tokens > k + 1 + 1e-9:
        return math.nan
    lo, hi = 0.0, 1.0
    for _ in range(60):  # tokens_per_step rises with α: bisection to ~1e-18
        mid = (lo + hi) / 2
        if tokens_per_step(mid, k) < tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def acceptance_text(mean_length: float, k: int, drafter: str | None = None) -> str:
    """Acceptance in the one vocabulary every pane, event, bench line, comparison and report
    uses: ``acceptance α 0.11 per position, mean acceptance length 1.14 (k=3, drafter X)``.

    The mean acceptance length is vLLM's ``1 + accepted / drafts``; α is the per-position
    acceptance that yields it (each draft token accepted, given the earlier ones were)."""
    alpha = alpha_for_tokens(mean_length, k) if k else math.nan
    a = f"α {alpha:.2f} per position" if math.isfinite(alpha) else "α unknown"
    length = f"{mean_length:.2f}" if math.isfinite(mean_length) else "unknown"
    who = f"k={k}" if k else "k unknown"
    who += f", drafter {drafter}" if drafter else ""
    return f"acceptance {a}, mean acceptance length {length} ({who})"


@dataclass(frozen=True, slots=True)
class SpecEconomics:
    """Speculative decoding at one level against the baseline at the same level."""

    label: str
    """The level, ``c=16``."""
    k: int
    mean_length: float
    """Tokens per spec step (the server's mean acceptance length)."""
    tpot_s: float
    base_tpot_s: float

    @property
    def alpha(self) -> float:
        """The per-position acceptance this run has (from its mean acceptance length)."""
        return alpha_for_tokens(self.mean_length, self.k)

    @property
    def step_s(self) -> float:
        return self.tpot_s * self.mean_length

    @property
    def step_ratio(self) -> float:
        """A spec step's cost in baseline steps: the tokens per step it must yield to pay."""
        return self.step_s / self.base_tpot_s if self.base_tpot_s > 0 else math.nan

    @property
    def breakeven_alpha(self) -> float:
        """The α at which this draft matches the baseline's TPOT here (nan: none can)."""
        return alpha_for_tokens(max(1.0, self.step_ratio), self.k)

    @property
    def speedup(self) -> float:
        """Baseline TPOT / spec TPOT (> 1: spec decoding is faster)."""
        return self.base_tpot_s / self.tpot_s if self.tpot_s > 0 else math.nan

    @property
    def draft_pass_s(self) -> float:
        """Each draft pass's cost, if verifying k + 1 tokens costs one baseline step."""
        return max(0.0, self.step_s - self.base_tpot_s) / self.k

    @property
    def pays(self) -> bool:
        return self.speedup >= 1.0

    def verdict(self) -> str:
        """``c=16: spec is 3.4× slower than baseline; it would need acceptance ≥ 0.71, it has
        0.12`` (acceptance: per position, as the model states it)."""
        has = f"it has α {self.alpha:.2f}" if math.isfinite(self.alpha) else "its α is unknown"
        be = self.breakeven_alpha
        if not self.pays:
            if math.isfinite(be):
                need = f"it would need acceptance α ≥ {be:.2f} per position, {has}"
            else:
                need = (
                    f"no acceptance α pays: a step costs {self.step_ratio:.1f} baseline steps and "
                    f"yields at most k+1 = {self.k + 1} tokens ({has})"
                )
            return f"{self.label}: spec is {1 / self.speedup:.1f}× slower than baseline; {need}"
        return (
            f"{self.label}: spec is {self.speedup:.1f}× faster than baseline; it pays while "
            f"acceptance α ≥ {be:.2f} per position ({has})"
        )

    def cost_line(self) -> str:
        """The step costs the verdict rests on."""
        return (
            f"{self.label}: spec step {latency_text(self.step_s)} (TPOT "
            f"{latency_text(self.tpot_s)} × mean acceptance length {self.mean_length:.2f}) vs "
            f"baseline step {latency_text(self.base_tpot_s)}; ≈ "
            f"{latency_text(self.draft_pass_s)} per draft pass (k={self.k}) if verifying k+1 "
            "tokens costs one baseline step"
        )


def economics(
    label: str, k: int, mean_length: float, tpot_s: float, base_tpot_s: float
) -> SpecEconomics | None:
    """The economics at one level, or None when a figure is missing."""
    figures = (mean_length, tpot_s, base_tpot_s)
    if k < 1 or not all(math.isfinite(x) and x > 0 for x in figures):
        return None
    return SpecEconomics(label, k, mean_length, tpot_s, base_tpot_s)
