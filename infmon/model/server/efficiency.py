"""Energy per step: the serving GPUs' mean power over a step against its output tokens/s, as
tokens/s per watt and joules per output token. Only where the GPUs report power (DCGM or
NVML); otherwise nothing is said (never a 0).

Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Efficiency:
    power_w: float
    """The serving GPUs' mean power summed (all GPUs when none is known to serve)."""
    tok_s_per_w: float
    j_per_token: float
    gpus: int

    def to_dict(self) -> dict[str, float | int | None]:
        def j(x: float, digits: int) -> float | None:
            return round(x, digits) if math.isfinite(x) else None

        return {
            "power_w": j(self.power_w, 1),
            "tok_s_per_w": j(self.tok_s_per_w, 4),
            "j_per_token": j(self.j_per_token, 4),
            "gpus": self.gpus,
        }


def step_efficiency(gpus: Sequence[tuple[float, bool]], output_tok_s: float) -> Efficiency | None:
    """``gpus``: each GPU's mean power over the step (nan: unknown) and whether it serves.
    None when no GPU reported power or the step made no tokens."""
    serving = [w for w, s in gpus if s] or [w for w, _ in gpus]
    known = [w for w in serving if math.isfinite(w) and w > 0]
    if not known or len(known) < len(serving) or not output_tok_s > 0:
        return None
    power = sum(known)
    return Efficiency(power, output_tok_s / power, power / output_tok_s, len(known))
