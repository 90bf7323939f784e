"""``--fail-if "tok/s<-5%,ttft_p90>+10%"``: regression rules for scripts and CI.

A rule names a figure of the baseline comparison (``infmon.model.compare.baseline.METRICS``, or a
run-wide limit such as ``kv_capacity``), a direction and a relative threshold. It fails at a
level when the change crosses the threshold **and** the noise test does not call it noise
(beyond noise, or no test possible: too few samples, an exact figure); a level the baseline did
not run is not judged. ``check`` returns every failure, one line each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.compare.baseline import BY_KEY, LIMITS, BaselineView, MetricDelta, fmt_rel

ALIASES = {
    "tok/s": "tok_s",
    "throughput": "tok_s",
    "out_tok_s": "tok_s",
    "e2el_p50": "e2e_p50",
    "e2el_p90": "e2e_p90",
}
_RULE = re.compile(r"^\s*([A-Za-z0-9_/]+)\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")


class RuleError(ValueError):
    """A ``--fail-if`` rule that cannot be read (the message says which and why)."""


@dataclass(frozen=True, slots=True)
class Rule:
    key: str
    op: str
    """``<``: fails when the change falls below the threshold; ``>``: when it rises above."""
    threshold: float
    """A fraction (-0.05 for -5 %)."""
    text: str

    def crossed(self, rel: float) -> bool:
        if not math.isfinite(rel):
            return False
        return rel < self.threshold if self.op == "<" else rel > self.threshold


def parse_rules(spec: str) -> tuple[Rule, ...]:
    """``tok/s<-5%,ttft_p90>+10%`` → rules (``RuleError`` on anything else)."""
    known = sorted({*BY_KEY, *(m.key for m in LIMITS), *ALIASES})
    rules = []
    for part in (p for p in spec.split(",") if p.strip()):
        m = _RULE.match(part)
        if m is None:
            raise RuleError(
                f"--fail-if {part.strip()!r}: expected METRIC<N% or METRIC>N%, e.g. tok/s<-5%"
            )
        name, op, value = m.groups()
        key = ALIASES.get(name.lower(), name.lower())
        if key not in BY_KEY and key not in {x.key for x in LIMITS}:
            raise RuleError(
                f"--fail-if {part.strip()!r}: unknown figure {name!r} (one of {', '.join(known)})"
            )
        rules.append(Rule(key, op, float(value) / 100.0, part.strip()))
    if not rules:
        raise RuleError("--fail-if: no rule given")
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class Failure:
    rule: Rule
    where: str
    """``c=16``, or ``run`` for a run-wide figure."""
    delta: MetricDelta

    @property
    def text(self) -> str:
        d = self.delta.delta
        test = {True: "beyond noise", None: "no noise test"}.get(d.beyond_noise, "within noise")
        if d.exact:
            test = "exact"
        return f"{self.rule.text}: {self.delta.metric.label} {fmt_rel(d)} at {self.where} ({test})"


def check(rules: Sequence[Rule], view: BaselineView) -> tuple[Failure, ...]:
    """Every (rule, level) that fails (see the module docstring)."""
    out = []
    for rule in rules:
        if rule.key in BY_KEY:
            for c in view.levels:
                d = c.get(rule.key)
                if c.in_baseline and d is not None and _fails(rule, d):
                    out.append(Failure(rule, c.label, d))
        else:
            for d in view.limits:
                if d.metric.key == rule.key and _fails(rule, d):
                    out.append(Failure(rule, "run", d))
    return tuple(out)


def _fails(rule: Rule, d: MetricDelta) -> bool:
    return rule.crossed(d.delta.rel) and d.delta.beyond_noise is not False
