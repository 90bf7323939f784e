"""The live session's side of the method: its levels against a baseline run, speculative
decoding per level, and the KV prediction beside the knee.

The levels are the step ledger's (``StepLedger.keep_levels``: the ledger routes every record,
window and scrape to its step once, for its own figures and the levels' alike); ``Session``
asks this for the extra views. The comparison itself
(bootstraps: tens to hundreds of milliseconds a level) is computed off the render loop from
``inputs()`` by ``compare_run``: ``poll`` (called from ``Session.snapshot``) takes the inputs on
the caller's thread every ``REFRESH_S`` and hands the computation to ``submit`` (the monitor
gives a one-thread executor's; without one it runs inline), returning the finished view on a
later call. No I/O, no threads of its own; time from the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from infmon.model.compare.baseline import (
    BaselineView,
    LevelComparison,
    Reference,
    RunFacts,
    SpecLevel,
    compare_run,
    spec_level,
)
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.evidence import ServerEvidence
from infmon.model.steps.knee import Knee, KneePoint
from infmon.model.steps.kv_fill import KneeLimit, knee_limit
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.step_levels import LevelSample

NAN = math.nan
REFRESH_S = 3.0
"""How often the comparison is recomputed live."""
Submit = Callable[[Callable[[], BaselineView]], "Future[BaselineView]"]


def facts_from_snapshot(
    snap: ServerSnapshot | None, max_num_seqs: float, tokens_per_seq: float
) -> RunFacts:
    """The running server's facts (what a report's ``facts_of`` reads from the journal)."""
    if snap is None:
        return RunFacts(max_num_seqs=max_num_seqs, tokens_per_seq=tokens_per_seq)
    spec = snap.spec_decode
    k = None if snap.backend is None else 0
    if spec is not None:
        k = len(spec.acceptance_per_position) or k
        if not k and spec.drafts_total and spec.draft_tokens_total:
            k = round(spec.draft_tokens_total / spec.drafts_total)

    def f(x: float | int | None) -> float:
        return NAN if x is None else float(x)

    return RunFacts(
        model=snap.models[0] if snap.models else None,
        spec_k=k,
        cache_dtype=snap.cache_config.get("cache_dtype"),
        kv_capacity_tokens=f(snap.kv_capacity_tokens),
        kv_block_size=f(snap.kv_block_size_tokens),
        kv_blocks=f(snap.kv_num_gpu_blocks),
        gpu_memory_utilization=snap.cache_config.get("gpu_memory_utilization"),
        max_model_len=f(snap.max_model_len),
        max_num_seqs=max_num_seqs,
        tokens_per_seq=tokens_per_seq,
    )


class LiveBaseline:
    """See the module docstring."""

    KEEP = 32
    """Steps whose levels are kept (the oldest are let go)."""

    def __init__(self, ledger: StepLedger) -> None:
        self.levels = ledger.keep_levels(self.KEEP, requests=False)
        self.reference: Reference | None = None
        self.view: BaselineView | None = None
        self.cache: dict[Any, LevelComparison] = {}
        self.submit: Submit | None = None
        """Where the comparison runs (None: inline, on ``poll``'s caller)."""
        self._pending: Future[BaselineView] | None = None
        self.error: str | None = None
        """Why the live comparison stopped (taken by the session as an event)."""
        self._last_s = -math.inf

    def set_reference(self, ref: Reference) -> None:
        """Compare with ``ref`` from now on (the per-request figures are kept from now)."""
        self.reference, self.view = ref, None
        self.levels.keep_requests = True

    # ---- the comparison -----------------------------------------------------------------------
    def inputs(
        self, now: float, evidence: Mapping[int, ServerEvidence | None], facts: RunFacts
    ) -> tuple[Reference, tuple[LevelSample, ...], RunFacts] | None:
        """What ``compare_run`` needs (copies: safe to hand to another thread)."""
        if self.reference is None:
            return None
        return self.reference, self.levels.samples(now, evidence), facts

    def refresh(
        self, now: float, evidence: Mapping[int, ServerEvidence | None], facts: RunFacts
    ) -> None:
        """Compute the comparison here and now (tests; the monitor uses a thread)."""
        got = self.inputs(now, evidence, facts)
        if got is not None:
            self.view = compare_run(*got, cache=self.cache)

    def poll(
        self,
        now: float,
        evidence: Callable[[], Mapping[int, ServerEvidence | None]],
        facts: Callable[[], RunFacts],
    ) -> BaselineView | None:
        """A newly finished comparison (else None); starts the next one every ``REFRESH_S``."""
        done = None
        if self._pending is not None and self._pending.done():
            pending, self._pending = self._pending, None
            try:
                done = pending.result()
            except Exception as exc:  # a bug: said once on screen, the comparison stops
                self.error = f"baseline comparison stopped: {exc.__class__.__name__}: {exc}"
                self.reference = None
                return None
        if self.reference is None or self._pending is not None or now - self._last_s < REFRESH_S:
            return done
        self._last_s = now
        got = self.inputs(now, evidence(), facts())
        if got is None:
            return done
        ref, samples, run_facts = got

        def job() -> BaselineView:
            return compare_run(ref, samples, run_facts, cache=self.cache)

        if self.submit is None:
            return job()
        self._pending = self.submit(job)
        return done

    # ---- the views ----------------------------------------------------------------------------
    def spec_levels(self, stats: Mapping[int, tuple[float, float]]) -> tuple[SpecLevel, ...]:
        """Speculative decoding per level: the comparison's (with the break-even) where there is
        one, else from the steps' own figures (``stats``: step → (ITL p50, TPOT p50))."""
        shown: dict[str, SpecLevel] = {}
        for index, b in sorted(self.levels.builders.items()):
            w = b.spec.window()
            if w is None or not w.k or index not in stats:
                continue
            itl, tpot = stats[index]
            tpc = b.output_tokens / b.chunks if b.chunks else NAN
            shown[b.span.level.label] = spec_level(b.span.level.label, w, tpc, itl, tpot)
        if self.view is not None:
            for c in self.view.levels:
                if c.spec is not None:
                    shown[c.label] = c.spec
        return tuple(shown.values())

    def knee_limit(
        self, knee: Knee | None, steps: Sequence[KneePoint | None], facts: RunFacts
    ) -> tuple[float, KneeLimit]:
        """Where KV fills (concurrency) and which limit the knee came from."""
        fill = facts.kv_fill
        return fill, knee_limit(knee, steps, fill, facts.max_num_seqs)
