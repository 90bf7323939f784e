"""One measured level of a session as the fit reads it (``infmon.sim.fit``): its load, what
the client measured, and the server's own per-request timings where it gave them. The fit, its
growth's shape (``infmon.sim.growth``), the rounds (``infmon.sim.rounds``) and the readers of a
session (``infmon.commands.simfit_read``) pass these; pure data, no fitting here."""

from __future__ import annotations

from dataclasses import dataclass

from infmon.sim.levels import Shape

FIGURES = ("tpot", "ttft", "tok_s", "server_tpot", "server_ttft", "server_prefill")
"""What an observation can carry: the client's mean TPOT and TTFT, output tokens/s, and the
server's own (vLLM's per-request timings: inter-token time, queued → first token, and of that
the prefill: scheduled → first token, the step that prefilled it)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One measured level of a session (all times in seconds)."""

    session: str
    concurrency: int
    prompt_tokens: float  # mean per request
    output_tokens: float
    tpot_s: float  # mean
    ttft_s: float  # mean (a median jumps between the waves of a lockstep burst)
    output_tok_s: float
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()  # marginal per position (vLLM's per-position counters)
    source: str = "client"
    """Whose TTFT and TPOT: ``client`` (the streams as read), ``server`` (vLLM's own
    per-request timings on its engine clock: queued → first token, mean inter-token time), or
    ``both`` (``tpot_s`` and ``ttft_s`` the client's, ``server_*`` the server's: the engine's
    steps are pinned by the server's, and the client's TTFT adds the API server's time)."""
    ttft_p50_s: float = float("nan")
    """The median TTFT from the same source (the client's with ``both``; NaN: not known)."""
    server_tpot_s: float = float("nan")
    server_ttft_s: float = float("nan")
    server_prefill_s: float = float("nan")
    arrival_wave: float = float("nan")
    """The closed loop's wave: the mean number of requests sent together (NaN: not known).
    Not fitted: it says which state of the loop a round's TTFT was measured in."""
    output_spread: int = 0
    """Half the range of its output lengths (``levels.output_spread``; 0: all alike)."""
    step: int = 0
    """The session's step it was measured in (0: not from a session's steps)."""

    @property
    def shape(self) -> Shape:
        return Shape(
            self.concurrency,
            max(1, round(self.prompt_tokens)),
            max(2, round(self.output_tokens)),
            self.speculative_k,
            conditional_acceptance(self.acceptance),
            output_spread=self.output_spread,
        )

    def targets(self) -> tuple[tuple[str, float], ...]:
        """(figure, value) of each measured figure linear in the costs: mean TPOT, mean TTFT,
        seconds per output token (the reciprocal of ``tok_s``'s value)."""
        server = self.source == "server"
        out: tuple[tuple[str, float], ...] = (
            ("server_tpot" if server else "tpot", self.tpot_s),
            ("server_ttft" if server else "ttft", self.ttft_s),
            ("tok_s", 1.0 / self.output_tok_s),
        )
        if self.source == "both":
            out += (("server_tpot", self.server_tpot_s), ("server_ttft", self.server_ttft_s))
            if self.server_prefill_s > 0:
                out += (("server_prefill", self.server_prefill_s),)
        return out

    def measured(self, figure: str) -> float:
        """A figure as measured (``tok_s`` in tokens/s)."""
        value = dict(self.targets())[figure]
        return 1.0 / value if figure == "tok_s" else value


def conditional_acceptance(marginal: tuple[float, ...]) -> tuple[float, ...]:
    """Per-position acceptance given the earlier positions were accepted."""
    out, prev = [], 1.0
    for m in marginal:
        out.append(min(1.0, m / prev) if prev > 0 else 0.0)
        prev = m
    return tuple(out)
