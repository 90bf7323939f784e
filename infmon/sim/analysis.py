"""Drive the engine directly in virtual time: closed-loop load without HTTP (fast curves)."""

from __future__ import annotations

from dataclasses import dataclass

from infmon.sim.engine import Engine, Sequence
from infmon.sim.roofline import EngineConfig


@dataclass(frozen=True, slots=True)
class LoadResult:
    concurrency: int
    duration_s: float
    output_tok_s: float
    finished: int
    generation_tokens: int
    preemptions: int
    max_waiting: int
    waiting_violations: int  # steps with waiting > 0 and none of the reasons vLLM would queue for
    drafts: int
    draft_tokens: int
    accepted_tokens: int
    accepted_per_pos: tuple[int, ...]
    mean_running: float


def closed_loop(
    cfg: EngineConfig,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    duration_s: float,
    warmup_s: float = 0.0,
    shared_prefix: int = 0,
) -> LoadResult:
    """``concurrency`` users, each sending the next request the moment the previous finishes.

    Prompts are distinct token ids (no prefix hits) except for ``shared_prefix`` leading tokens.
    Requests ignore EOS and ask for exactly ``output_tokens``. Figures count after ``warmup_s``.
    """
    engine = Engine(cfg)
    counter = [0]

    def submit(now_s: float) -> None:
        n = counter[0]
        counter[0] += 1
        ids = list(range(shared_prefix)) + [
            10**6 + n * 100_000 + i for i in range(prompt_tokens - shared_prefix)
        ]
        engine.add(Sequence(f"r{n}", prompt_tokens, output_tokens, None, now_s), ids)

    for _ in range(concurrency):
        submit(0.0)
    t = 0.0
    acc = {
        "gen": 0,
        "fin": 0,
        "pre": 0,
        "maxw": 0,
        "viol": 0,
        "d": 0,
        "dt": 0,
        "a": 0,
        "run": 0,
        "steps": 0,
    }
    per_pos = [0] * (cfg.speculative_k if cfg.spec_enabled else 0)
    while t < duration_s:
        out = engine.step(t)
        t = out.end_s if out.end_s > t else t + 1e-3
        for _ in out.finished:
            submit(t)
        if t < warmup_s:
            continue
        waiting_ok = out.running >= cfg.max_num_seqs or out.kv_blocked or out.budget_left == 0
        acc["viol"] += int(out.waiting > 0 and not waiting_ok)
        acc["gen"] += out.generation_tokens
        acc["fin"] += len(out.finished)
        acc["pre"] += out.preemptions
        acc["maxw"] = max(acc["maxw"], out.waiting)
        acc["d"] += out.drafts
        acc["dt"] += out.draft_tokens
        acc["a"] += out.accepted_tokens
        acc["run"] += out.running
        acc["steps"] += 1
        for i, v in enumerate(out.accepted_per_pos):
            per_pos[i] += v
    span = t - warmup_s
    return LoadResult(
        concurrency,
        span,
        acc["gen"] / span,
        acc["fin"],
        acc["gen"],
        acc["pre"],
        acc["maxw"],
        acc["viol"],
        acc["d"],
        acc["dt"],
        acc["a"],
        tuple(per_pos),
        acc["run"] / max(1, acc["steps"]),
    )


def ngram_acceptance(
    cfg: EngineConfig, prompts: list[str], output_tokens: int = 256, seed: int = 0
) -> tuple[float, float]:
    """(acceptance rate, mean acceptance length) of the n-gram drafter on these prompts.

    Each prompt is answered by the simulator's own text model (as the HTTP server answers it),
    one request at a time; the drafter looks up the prompt and the output so far.
    """
    from infmon.sim.text import TextModel, token_ids

    text = TextModel({}, 0.0, seed)
    engine = Engine(cfg)
    t = 0.0
    for i, prompt in enumerate(prompts):
        cont = text.continuation(prompt, None)
        ids = token_ids(prompt)
        seq = Sequence(f"n{i}", len(ids), output_tokens, None, t, truth=cont.token_id)
        engine.add(seq, ids)
    drafts = draft_tokens = accepted = 0
    while engine.has_work:
        out = engine.step(t)
        t = max(out.end_s, t + 1e-6)
        drafts += out.drafts
        draft_tokens += out.draft_tokens
        accepted += out.accepted_tokens
    if not drafts:
        return 0.0, 1.0
    return accepted / max(1, draft_tokens), 1.0 + accepted / drafts
