"""The simulated vLLM V1 engine: a scheduler in discrete steps, in virtual time.

Each ``step(now_s)`` schedules running requests first (decode: 1 token, or 1 + k drafts with
speculative decoding; unfinished prefills continue), preempting the newest running request
(recompute) when KV blocks run out, then admits waiting requests in chunks within
``max_num_batched_tokens`` while fewer than ``max_num_seqs`` run. The step's duration is the
roofline figure; its effects are stamped at ``now_s + duration``. The engine knows nothing of
HTTP or wall time: the server sleeps for the duration, the tests just add it up.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from infmon.sim.kvcache import BlockPool, block_hashes
from infmon.sim.kvtransfer import HOST, P2P, HostTier, KvMove, Link
from infmon.sim.memory import memory_budget
from infmon.sim.roofline import EngineConfig, PassLoad, StepLoad, kernel_time_s, step_cost
from infmon.sim.spec import NgramIndex, accept_drawn, draw_scale, expand_acceptance


@dataclass(slots=True, eq=False)
class Sequence:
    """One request inside the engine (mutable engine state; ``handle`` belongs to the caller)."""

    req_id: str
    prompt_len: int
    max_tokens: int
    stop_at: int | None  # output length at which the model emits EOS; None = ignore_eos
    arrival_s: float
    hashes: list[int] = field(default_factory=list)
    handle: object = None
    num_computed: int = 0
    output_len: int = 0
    blocks: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    registered: int = 0
    num_preemptions: int = 0
    scheduled_s: float = math.nan
    first_token_s: float = math.nan
    last_token_s: float = math.nan
    finish_s: float = math.nan
    finish_reason: str | None = None
    truth: Callable[[int], int] | None = None  # token id of output position i (n-gram lookup)
    accept_scale: float = 1.0  # this request's acceptance scale (spec.draw_scale)
    ngram: NgramIndex | None = None
    proposal: list[int] = field(default_factory=list)
    queued_s: float = math.nan  # reached the scheduler (after the API server's own work)
    taken_s: float = math.nan
    """The engine loop took it in, at a step's start (vLLM stamps QUEUED there: its busy
    loop reads its input queue between steps, so a request that came mid-step is queued when
    that step ends; the real one here showed a 0.01 ms queue at every concurrency)."""
    spec_accepted_log: list[int] = field(default_factory=list)  # per verify step (per-request
    spec_drafted_log: list[int] = field(default_factory=list)  # metrics, as vLLM's detailed)
    external_tokens: int = 0  # prompt tokens whose KV was loaded (offload) or pulled (P/D)
    kv_ready_s: float = -math.inf  # its KV is moving until then (waits, deferred)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.output_len


@dataclass(slots=True)
class StepOutput:
    start_s: float
    end_s: float
    emitted: list[tuple[Sequence, int]]  # (sequence, new tokens this step)
    finished: list[Sequence]
    scheduled_tokens: int = 0
    context_tokens: int = 0
    prompt_done_tokens: int = 0  # prompt length of requests whose prefill finished
    prompt_done_cached: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    budget_left: int = 0
    kv_blocked: bool = False  # a request could not get KV blocks this step
    deferred: int = 0  # waiting requests whose KV is still moving
    moves: list[KvMove] = field(default_factory=list)  # KV transfers started this step
    prompt_done_external: int = 0
    external_queries: int = 0  # tokens asked of the KV connector (offload tier / prefill pod)
    external_hits: int = 0
    flops: float = 0.0  # target and drafter, for vLLM's MFU counters
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    kernel_s: float = 0.0  # the step's GPU work (no host time, no neighbour): DCGM activity
    load: StepLoad | None = None  # what the step priced (the fit sums its cost vector)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _reached(seq: Sequence) -> float:
    """When the request reached the scheduler (its arrival where no API server queued it)."""
    return seq.queued_s if seq.queued_s == seq.queued_s else seq.arrival_s


def queued_at(seq: Sequence) -> float:
    """vLLM's QUEUED stamp: when the engine loop took the request in."""
    return seq.taken_s if seq.taken_s == seq.taken_s else _reached(seq)


class Engine:
    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg
        self.budget = memory_budget(cfg)
        self.pool = BlockPool(self.budget.num_gpu_blocks, cfg.kv_cache_metrics, cfg.seed)
        self.running: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self.untaken: deque[Sequence] = deque()  # added, not yet taken in by a step
        self.rng = random.Random(cfg.seed)
        self.k = cfg.speculative_k if cfg.spec_enabled else 0
        self.cond = expand_acceptance(cfg.acceptance, self.k)
        self.pace = 1.0
        """Each step's time is multiplied by this: 1 at full speed; the ``wander`` fault (a host
        whose cores run at two speeds by turns) sets it higher in its slow turns."""
        self.block_bytes = self.budget.kv_bytes_per_token * cfg.block_size
        if cfg.kv_offloading_gib > 0:
            self.pool.host = HostTier(int(cfg.kv_offloading_gib * 2**30 // self.block_bytes))
        self.links = {
            HOST: Link(cfg.host_link_gb_s, cfg.host_link_latency_s),
            P2P: Link(cfg.pd_link_gb_s, cfg.pd_link_latency_s),
        }
        self.loading: set[Sequence] = set()

    # -- requests -------------------------------------------------------------------------
    def add(self, seq: Sequence, ids: list[int] | None = None) -> None:
        if ids is not None and self.cfg.enable_prefix_caching:
            seq.hashes = block_hashes(ids, self.cfg.block_size)
        if self.k:
            seq.accept_scale = draw_scale(self.rng, self.cfg.acceptance_concentration)
            if self.cfg.spec_method == "ngram" and ids is not None and seq.truth is not None:
                seq.ngram = NgramIndex(ids, self.cfg.prompt_lookup_min, self.cfg.prompt_lookup_max)
        self.waiting.append(seq)
        self.untaken.append(seq)

    def abort(self, seq: Sequence, now_s: float) -> bool:
        """Remove a request (client went away); True if it was still in the engine."""
        if seq.finish_reason is not None:
            return False
        if seq in self.waiting:
            self.waiting.remove(seq)
        elif seq in self.running:
            self.running.remove(seq)
        self.pool.release(seq.blocks)
        self.loading.discard(seq)
        seq.blocks = []
        seq.finish_reason = "abort"
        seq.finish_s = now_s
        return True

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- scheduling -----------------------------------------------------------------------
    def _blocks_needed(self, seq: Sequence, n: int) -> int:
        return max(0, -(-(seq.num_computed + n) // self.cfg.block_size) - len(seq.blocks))

    def _preempt(self, seq: Sequence, out: StepOutput) -> None:
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.num_computed = 0
        seq.registered = 0
        seq.num_preemptions += 1
        out.preemptions += 1
        self.waiting.appendleft(seq)

    def _schedule_running(self, out: StepOutput, budget: int) -> tuple[list, int]:
        plan: list[tuple[Sequence, int, bool]] = []
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            left = seq.num_tokens - seq.num_computed
            spec = self.k > 0 and left == 1 and budget >= 1 + self.k and self._propose(seq)
            n = 1 + len(seq.proposal) if spec else min(left, budget)
            need = self._blocks_needed(seq, n)
            preempted_self = False
            while need > self.pool.num_free:
                victim = self.running.pop()
                self._preempt(victim, out)
                if victim is seq:
                    preempted_self = True
                    break
            if preempted_self:
                break
            seq.blocks.extend(self.pool.allocate(need) or [])
            plan.append((seq, n, spec))
            budget -= n
            i += 1
        return plan, budget

    def _propose(self, seq: Sequence) -> bool:
        """Draft for this step: n-gram lookup where the text is known, else k drawn tokens."""
        if seq.ngram is not None:
            seq.proposal = seq.ngram.propose(self.k)
        else:
            seq.proposal = [0] * self.k
        return bool(seq.proposal)

    def _admit(self, seq: Sequence, out: StepOutput, budget: int, now_s: float) -> int:
        """Try to start (or resume) a waiting request; returns tokens scheduled (0 = no room;
        -1 = it got blocks for KV that now moves in from outside: it waits, deferred)."""
        if seq.blocks:  # its KV has arrived: compute the rest
            n = min(seq.num_tokens - seq.num_computed, budget)
            new = self.pool.allocate(self._blocks_needed(seq, n))
            if new is None:
                return 0
            seq.blocks.extend(new)
            return self._started(seq, n, now_s)
        hits: list[int] = []
        if seq.num_computed == 0 and seq.hashes:
            hits = self.pool.lookup(seq.hashes, (seq.num_tokens - 1) // self.cfg.block_size)
        local = len(hits) * self.cfg.block_size
        ext, source = self._external(seq, len(hits))
        n = 0 if ext else min(seq.num_tokens - local, budget)
        # KV moving in: blocks for the whole request now, so that once it has arrived the
        # request never waits for blocks while holding some (no deadlock of loaded requests)
        bs = self.cfg.block_size
        blocks_after = -(-(seq.num_tokens if ext else local + n) // bs)
        new = self.pool.allocate(blocks_after - len(hits))
        if new is None:
            self.pool.release(hits)
            return 0
        seq.blocks = hits + new
        seq.num_computed = local + ext
        out.prefix_queries += seq.num_tokens
        out.prefix_hits += local
        if seq.num_preemptions == 0:
            seq.cached_tokens = local
        if source:
            out.external_queries += seq.num_tokens
        if ext:
            self._start_move(seq, ext, source, -(-(local + ext) // bs) - len(hits), out, now_s)
            return -1
        return self._started(seq, n, now_s)

    @staticmethod
    def _started(seq: Sequence, n: int, now_s: float) -> int:
        if math.isnan(seq.scheduled_s):
            seq.scheduled_s = now_s
        return n

    def _external(self, seq: Sequence, gpu_hits: int) -> tuple[int, str]:
        """Prompt tokens the KV connector supplies past the GPU's own hits, and from where
        ("" = no connector). After a preemption the request recomputes (its KV is gone)."""
        if seq.num_computed or seq.num_preemptions:
            return 0, ""
        bs = self.cfg.block_size
        if self.cfg.pd_role == "decode":  # all but the last prompt token: it samples the first
            return max(0, seq.prompt_len - 1 - gpu_hits * bs), P2P
        host = self.pool.host
        if host is None:
            return 0, ""
        return host.prefix(seq.hashes[gpu_hits : (seq.num_tokens - 1) // bs]) * bs, HOST

    def _start_move(
        self, seq: Sequence, ext: int, source: str, blocks: int, out: StepOutput, now_s: float
    ) -> None:
        nbytes = float(blocks * self.block_bytes)
        t = self.links[source].time_s(nbytes)
        seq.kv_ready_s = now_s + t
        seq.external_tokens = ext
        self.loading.add(seq)
        out.external_hits += ext
        out.moves.append(KvMove(source, blocks, nbytes, t, ext))

    def _schedule(self, out: StepOutput, now_s: float) -> list[tuple[Sequence, int, bool]]:
        plan, budget = self._schedule_running(out, self.cfg.max_num_batched_tokens)
        out.budget_left = budget
        if out.preemptions:
            out.kv_blocked = True
            return plan
        budget = self._admit_arrived(out, plan, budget, now_s)
        skipped: list[Sequence] = []
        while (
            self.waiting
            and _reached(self.waiting[0]) <= now_s  # a step the engine runs behind the wall
            and len(self.running) < self.cfg.max_num_seqs  # clock never takes a later arrival
            and budget > 0
        ):
            seq = self.waiting[0]
            n = -1 if seq.kv_ready_s > now_s else self._admit(seq, out, budget, now_s)
            if n == 0:
                out.kv_blocked = True
                break
            self.waiting.popleft()
            if n < 0:  # its KV is moving: vLLM skips it this step (WAITING_FOR_REMOTE_KVS)
                skipped.append(seq)
                continue
            self.loading.discard(seq)
            self.running.append(seq)
            plan.append((seq, n, False))
            budget -= n
        self.waiting.extendleft(reversed(skipped))
        out.budget_left = budget
        return plan

    def _admit_arrived(self, out: StepOutput, plan: list, budget: int, now_s: float) -> int:
        """Requests whose KV has moved in hold every block they need: they start first, wherever
        they wait (else a request at the head that cannot get blocks while they hold them
        would stop the queue for good)."""
        arrived = sorted((s for s in self.loading if s.kv_ready_s <= now_s), key=_reached)
        for seq in arrived:
            if len(self.running) >= self.cfg.max_num_seqs or budget <= 0:
                break
            n = self._admit(seq, out, budget, now_s)
            if n <= 0:
                continue
            self.waiting.remove(seq)
            self.loading.discard(seq)
            self.running.append(seq)
            plan.append((seq, n, False))
            budget -= n
        return budget

    # -- one step -------------------------------------------------------------------------
    def step(self, now_s: float) -> StepOutput:
        out = StepOutput(
            start_s=now_s, end_s=now_s, emitted=[], finished=[], accepted_per_pos=[0] * self.k
        )
        self.pool.now_s = now_s
        while self.untaken and _reached(self.untaken[0]) <= now_s:
            self.untaken.popleft().taken_s = now_s
        plan = self._schedule(out, now_s)
        if plan:
            load = out.load = self._load(plan)
            cost = step_cost(self.cfg, load)
            out.end_s = now_s + cost.time_s * self.pace
            out.kernel_s = kernel_time_s(self.cfg, load, cost)
            out.flops, out.read_bytes, out.write_bytes = (
                cost.flops,
                cost.read_bytes,
                cost.write_bytes,
            )
        out.scheduled_tokens = sum(n for _, n, _ in plan)
        out.context_tokens = sum(seq.num_computed + n for seq, n, _ in plan)
        out.running = len(self.running)
        out.waiting = len(self.waiting)
        out.deferred = sum(1 for s in self.loading if s.kv_ready_s > now_s)
        self._stores(out)
        for seq, n, is_spec in plan:
            self._advance(seq, n, is_spec, out)
        self._finish_done(out)
        out.kv_usage = self.pool.usage
        return out

    def _stores(self, out: StepOutput) -> None:
        """Blocks the GPU evicted to the host tier this step (copies overlap compute)."""
        blocks, self.pool.stored = self.pool.stored, 0
        if blocks:
            nbytes = float(blocks * self.block_bytes)
            out.moves.append(KvMove("store", blocks, nbytes, self.links[HOST].time_s(nbytes)))

    def _load(self, plan: list[tuple[Sequence, int, bool]]) -> StepLoad:
        tokens = sampled = ctx = spec_seqs = spec_ctx = prefill = 0
        pairs = prefill_pairs = 0.0
        for seq, n, is_spec in plan:
            before = seq.num_computed
            tokens += n
            ctx += before + n
            pairs += n * (before + n / 2)
            if is_spec:
                sampled += n
                spec_seqs += 1
                spec_ctx += before
            else:
                sampled += 1 if before + n >= seq.num_tokens else 0
                if before < seq.prompt_len:
                    prefill += n
                    prefill_pairs += n * (before + n / 2)
        target = PassLoad(tokens, sampled, ctx, pairs)
        return StepLoad(target, len(plan), spec_seqs, spec_ctx, prefill, prefill_pairs)

    def _accept(self, seq: Sequence, out: StepOutput) -> int:
        drafted = len(seq.proposal)
        truth = seq.truth
        if seq.ngram is not None and truth is not None:
            base = seq.output_len
            accepted = next(
                (i for i, tok in enumerate(seq.proposal) if tok != truth(base + i)), drafted
            )
        else:
            accepted = accept_drawn(self.rng, self.cond[:drafted], seq.accept_scale)
        for i in range(accepted):
            out.accepted_per_pos[i] += 1
        out.drafts += 1
        out.draft_tokens += drafted
        out.accepted_tokens += accepted
        seq.spec_accepted_log.append(accepted)
        seq.spec_drafted_log.append(drafted)
        return accepted

    def _advance(self, seq: Sequence, n: int, is_spec: bool, out: StepOutput) -> None:
        was_prefilling = seq.output_len == 0
        computed = 1 + self._accept(seq, out) if is_spec else n
        seq.num_computed += computed
        self._register_blocks(seq)
        if seq.num_computed < seq.num_tokens:
            return  # a prefill chunk: no token sampled yet
        new = computed if is_spec else 1
        limit = seq.max_tokens if seq.stop_at is None else min(seq.max_tokens, seq.stop_at)
        new = min(new, limit - seq.output_len)
        if seq.ngram is not None and seq.truth is not None:
            for i in range(new):
                seq.ngram.append(seq.truth(seq.output_len + i))
        seq.output_len += new
        out.generation_tokens += new
        out.emitted.append((seq, new))
        if was_prefilling:
            seq.first_token_s = out.end_s
            out.prompt_done_tokens += seq.prompt_len
            out.prompt_done_cached += seq.cached_tokens
            out.prompt_done_external += seq.external_tokens
        seq.last_token_s = out.end_s
        if seq.output_len >= limit:
            seq.finish_reason = "length" if seq.output_len >= seq.max_tokens else "stop"

    def _register_blocks(self, seq: Sequence) -> None:
        if seq.registered >= len(seq.hashes):
            return
        full = min(len(seq.hashes), seq.num_computed // self.cfg.block_size)
        for i in range(seq.registered, full):
            self.pool.register(seq.blocks[i], seq.hashes[i])
        seq.registered = max(seq.registered, full)

    def _finish_done(self, out: StepOutput) -> None:
        if not any(s.finish_reason for s in self.running):
            return
        keep = []
        for seq in self.running:
            if seq.finish_reason is None:
                keep.append(seq)
                continue
            seq.finish_s = out.end_s
            self.pool.release(seq.blocks)
            seq.blocks = []
            out.finished.append(seq)
        self.running = keep
