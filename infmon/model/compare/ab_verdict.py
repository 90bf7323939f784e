"""One A/B verdict over speed, the SLO frontier and quality together, from an interleaved run
(baseline and change measured A-B-A-B with the same workload), and the ``--fail-if`` rules on it.

- **Speed**: per level, the change's output tok/s over the baseline's, each round's B over the
  A measured next to it (paired, 95 % t interval on the log ratio:
  ``model/compare/trial_stats.py``). A round whose client was late at that level (its
  self-check ``client_late``: the step's timestamps carry the client's delay, not the
  server's) is left out together with its pair, and the verdict says how many.
- **SLO frontier**: each side's ``--search slo`` verdict (the last passing level), "37 → 52".
- **Quality**: non-inferiority of the change's probe score against the baseline's, the probes
  paired by id: the 95 % interval of the difference in points (a paired Wald interval, at
  least one discordant pair assumed) must stay above −margin to say "not worse".

Pure: figures in, a verdict and its JSON out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from infmon.model.compare.trial_stats import Ratio, TrialStats, ratio_ci, summarize

Z95 = 1.959963984540054
QualityWord = Literal["not worse", "worse", "inconclusive"]


@dataclass(frozen=True, slots=True)
class Trial:
    """One side's output tok/s at one level in one round."""

    tok_s: float
    late: bool = False
    """The client's timestamps were late in that step (its self-check ``client_late``)."""


@dataclass(frozen=True, slots=True)
class SpeedAt:
    """The change's speed over the baseline's at one level."""

    level: str
    value: float
    a: TrialStats
    b: TrialStats
    ratio: Ratio
    rounds: int = 0
    """Rounds that measured this level on both sides."""
    left_out: int = 0
    """Of those, rounds left out with their pair: the client was late on either side."""

    def text(self) -> str:
        return self._ratio_text() + self.left_out_text()

    def left_out_text(self) -> str:
        """`` (1 of 4 rounds left out: client late)``; "" when none was."""
        if not self.left_out:
            return ""
        return f" ({self.left_out} of {self.rounds} rounds left out: client late)"

    def _ratio_text(self) -> str:
        r = self.ratio
        if math.isnan(r.ratio):
            return f"speed not measured at {self.level}"
        span = "" if math.isnan(r.low) else f" ({r.low:.2f}–{r.high:.2f})"
        if not r.beyond_noise and not math.isnan(r.low):
            return f"no faster or slower beyond noise ({r.ratio:.2f}×{span}) at {self.level}"
        if r.ratio >= 1:
            return f"{r.ratio:.2f}× faster{span} at {self.level}"
        inv = "" if math.isnan(r.low) else f" ({1 / r.high:.2f}–{1 / r.low:.2f})"
        return f"{1 / r.ratio:.2f}× slower{inv} at {self.level}"


Trials = Sequence[float] | Sequence[Trial]


def _trials(xs: Trials) -> list[Trial]:
    return [x if isinstance(x, Trial) else Trial(x) for x in xs]


def speeds(a: Mapping[float, Trials], b: Mapping[float, Trials]) -> list[SpeedAt]:
    """Each level both sides measured: tok/s trials in round order (paired by round). A round
    whose client was late on either side is left out with its pair."""
    out = []
    for level in sorted(set(a) & set(b)):
        ta, tb = _trials(a[level]), _trials(b[level])
        n = min(len(ta), len(tb))
        pairs = [(x, y) for x, y in zip(ta[:n], tb[:n], strict=True) if not (x.late or y.late)]
        paired = len(pairs) >= 2
        if paired:
            xa, xb = [x.tok_s for x, _ in pairs], [y.tok_s for _, y in pairs]
        else:  # fewer than two clean pairs: the clean trials, unpaired
            xa, xb = [x.tok_s for x in ta if not x.late], [y.tok_s for y in tb if not y.late]
        ratio = ratio_ci(xa, xb, paired=paired)
        left = n - len(pairs)
        label = f"c={level:g}"
        out.append(SpeedAt(label, level, summarize(xa), summarize(xb), ratio, n, left))
    return out


def speeds_tight(at: Sequence[SpeedAt], target: float, least: int = 3) -> bool:
    """``--until-ci`` for an A/B run: every level's paired speed ratio has at least ``least``
    rounds and its 95 % interval within ``target`` of the ratio (e.g. 0.05 for ±5 %)."""

    def tight(s: SpeedAt) -> bool:
        r = s.ratio
        ok = r.paired and r.n >= least and math.isfinite(r.low) and r.ratio > 0
        return ok and (r.high - r.low) / 2 / r.ratio <= target

    return bool(at) and all(tight(s) for s in at)


@dataclass(frozen=True, slots=True)
class FrontierMove:
    """Each side's SLO frontier (the last passing level; None: none passed)."""

    a: float | None
    b: float | None
    a_open: bool = False
    """The baseline met the SLO up to the search's top: its frontier is at least ``a``."""
    b_open: bool = False

    @property
    def change(self) -> float:
        """(b − a) / a; −100 % when the change meets the SLO nowhere; nan when unknown."""
        if self.a is None or self.a <= 0:
            return math.nan
        return ((self.b or 0.0) - self.a) / self.a

    def text(self) -> str:
        def side(x: float | None, open_: bool) -> str:
            return "none" if x is None else f"{'≥ ' if open_ else ''}{x:g}"

        return f"SLO frontier {side(self.a, self.a_open)} → {side(self.b, self.b_open)}"


@dataclass(frozen=True, slots=True)
class QualityCheck:
    n: int
    a_correct: int
    b_correct: int
    diff: float
    """Change's score minus the baseline's, as a fraction (−0.04: 4 points worse)."""
    low: float
    high: float
    margin: float

    @property
    def word(self) -> QualityWord:
        if self.low >= -self.margin:
            return "not worse"
        if self.high < -self.margin:
            return "worse"
        return "inconclusive"

    def text(self) -> str:
        m = f"margin {self.margin * 100:g} points"
        if self.word == "not worse":
            return f"quality not worse ({m})"
        detail = (
            f"{self.diff * 100:+.1f} points, 95% CI {self.low * 100:+.1f} to {self.high * 100:+.1f}"
        )
        if self.word == "worse":
            return f"quality worse ({detail}; {m})"
        return f"quality not shown to be not worse ({detail}; {m})"


def quality_check(a: Mapping[str, bool], b: Mapping[str, bool], margin: float) -> QualityCheck:
    """Probes answered by both, paired by id."""
    ids = sorted(set(a) & set(b))
    n = len(ids)
    if n == 0:
        nan = math.nan
        return QualityCheck(0, 0, 0, nan, nan, nan, margin)
    worse = sum(a[i] and not b[i] for i in ids)
    better = sum(b[i] and not a[i] for i in ids)
    diff = (better - worse) / n
    se = math.sqrt(max(worse + better, 1) - (better - worse) ** 2 / n) / n
    ac, bc = sum(a[i] for i in ids), sum(b[i] for i in ids)
    return QualityCheck(n, ac, bc, diff, diff - Z95 * se, diff + Z95 * se, margin)


@dataclass(frozen=True, slots=True)
class AbabVerdict:
    label_a: str
    label_b: str
    rounds: int
    speeds: tuple[SpeedAt, ...]
    frontier: FrontierMove | None
    quality: QualityCheck | None
    stop: str | None = None
    """Why the rounds stopped before their most (``--until-ci``), else None."""

    @property
    def headline(self) -> SpeedAt | None:
        """The highest level both sides measured (where a change in speed matters most) and
        whose speed is known: a higher level whose every round had a late client is said apart."""
        known = [s for s in self.speeds if not math.isnan(s.ratio.ratio)]
        return known[-1] if known else (self.speeds[-1] if self.speeds else None)

    def _unknown_above(self, h: SpeedAt) -> str:
        """``; c=16 not measured (3 of 3 rounds left out: client late)`` for levels above."""
        above = [s for s in self.speeds if s.value > h.value]
        return "".join(f"; {s.level} not measured{s.left_out_text()}" for s in above)

    def sentence(self) -> str:
        h = self.headline
        parts = [h.text() + self._unknown_above(h) if h else "speed not measured"]
        if self.frontier is not None:
            parts.append(self.frontier.text())
        if self.quality is not None and self.quality.n:
            parts.append(self.quality.text())
        return f"{self.label_b}: " + ", ".join(parts)


class AbabRuleError(ValueError):
    """A ``--fail-if`` rule the A/B verdict cannot judge."""


_RULE = re.compile(r"^\s*(frontier|speed|tok/s|quality)\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True, slots=True)
class AbabRule:
    key: str
    """``frontier`` (relative change), ``speed`` (ratio − 1 at the headline level, beyond
    noise) or ``quality`` (the difference's interval bound, in points)."""
    op: str
    threshold: float
    text: str


def parse_abab_rules(spec: str) -> tuple[AbabRule, ...]:
    """``frontier<-10%,speed<-5%,quality<-2%`` → rules."""
    out = []
    for part in (p for p in spec.split(",") if p.strip()):
        m = _RULE.match(part)
        if m is None:
            raise AbabRuleError(
                f"--fail-if {part.strip()!r}: with --abab use frontier<N%, speed<N% or "
                "quality<N% (points), e.g. frontier<-10%"
            )
        key = "speed" if m.group(1) == "tok/s" else m.group(1)
        out.append(AbabRule(key, m.group(2), float(m.group(3)) / 100, part.strip()))
    if not out:
        raise AbabRuleError("--fail-if: no rule given")
    return tuple(out)


def _crossed(op: str, x: float, threshold: float) -> bool:
    return math.isfinite(x) and (x < threshold if op == "<" else x > threshold)


def failures(rules: Sequence[AbabRule], v: AbabVerdict) -> list[str]:
    """One line per rule the verdict crosses."""
    out = []
    for r in rules:
        if r.key == "frontier" and v.frontier is not None:
            if _crossed(r.op, v.frontier.change, r.threshold):
                out.append(f"{r.text}: {v.frontier.text()} ({v.frontier.change:+.0%})")
        elif r.key == "speed" and (h := v.headline) is not None and h.ratio.beyond_noise:
            if _crossed(r.op, h.ratio.ratio - 1, r.threshold):
                out.append(f"{r.text}: {h.text()}")
        elif r.key == "quality" and v.quality is not None and v.quality.n:
            q = v.quality
            bound = q.low if r.op == "<" else q.high
            if _crossed(r.op, bound, r.threshold):
                out.append(f"{r.text}: {q.text()}")
    return out


def _j(x: float, digits: int = 4) -> float | None:
    return round(x, digits) if math.isfinite(x) else None


def verdict_doc(v: AbabVerdict, rules: Sequence[AbabRule] = ()) -> dict[str, object]:
    """``abab.json`` (schema ``infmon.abab/1``)."""
    speed = [
        {
            "level": s.level,
            "value": s.value,
            "ratio": _j(s.ratio.ratio),
            "ci_low": _j(s.ratio.low),
            "ci_high": _j(s.ratio.high),
            "paired": s.ratio.paired,
            "beyond_noise": s.ratio.beyond_noise,
            "a_tok_s_mean": _j(s.a.mean, 2),
            "b_tok_s_mean": _j(s.b.mean, 2),
            "a_cv": _j(s.a.cv),
            "b_cv": _j(s.b.cv),
            "n": s.ratio.n,
            "rounds": s.rounds,
            "rounds_left_out": s.left_out,
        }
        for s in v.speeds
    ]
    f, q = v.frontier, v.quality
    return {
        "schema": "infmon.abab/1",
        "baseline": v.label_a,
        "change": v.label_b,
        "rounds": v.rounds,
        "stopped": v.stop,
        "sentence": v.sentence(),
        "speed": speed,
        "headline_level": v.headline.level if v.headline else None,
        "frontier": None
        if f is None
        else {"a": f.a, "b": f.b, "a_open": f.a_open, "b_open": f.b_open, "change": _j(f.change)},
        "quality": None
        if q is None
        else {
            "probes": q.n,
            "a_correct": q.a_correct,
            "b_correct": q.b_correct,
            "diff_points": _j(q.diff * 100, 2),
            "ci_low_points": _j(q.low * 100, 2),
            "ci_high_points": _j(q.high * 100, 2),
            "margin_points": _j(q.margin * 100, 2),
            "verdict": q.word if q.n else None,
        },
        "failed_rules": failures(rules, v),
    }
