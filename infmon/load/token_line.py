"""Counting a prompt's tokens on a server with no tokenize endpoint, and choosing the counter.

:class:`ApproxCounter` is a straight line, tokens ≈ a·characters + b, fitted to a few probes'
``usage.prompt_tokens`` (one-token generation requests, :func:`probe_prompt_tokens`); its
counts say "approximate (±k tokens)", k the largest miss on the probes. When the probes give no
line, counts are guessed at ``GUESS_CHARS_PER_TOKEN`` characters a token, unchecked.
:func:`make_counter` picks the server's own tokenizer (``infmon.load.tokenize``) where it has
one, else this line.
"""

from __future__ import annotations

import math

import httpx

from infmon.load.tokenize import (
    Counter,
    ServerTokenizer,
    TokenizeError,
    probe_prompt_tokens,
    prompt_pairs,
)
from infmon.load.workload.items import Prompt

PROBE_SIZES_CHARS = (256, 1024, 3072)
"""Prompt sizes of the calibration probes when the server has no tokenize endpoint."""
GUESS_CHARS_PER_TOKEN = 4.0
"""When nothing can be measured: English text and code average about 4 characters a token."""


class ApproxCounter:
    """No tokenize endpoint: tokens ≈ a·characters + b, fitted to a few probes' usage."""

    exact = False

    def __init__(self, slope: float, intercept: float, error_tokens: int, probes: int) -> None:
        self.slope, self.intercept = slope, intercept
        self.error_tokens = error_tokens
        self.probes = probes

    def describe(self) -> str:
        if not self.probes:
            return (
                "approximate (no tokenize endpoint and no usage.prompt_tokens: sized at "
                f"{1 / self.slope:.0f} characters per token, unchecked)"
            )
        return (
            f"approximate (±{self.error_tokens} tokens: no tokenize endpoint, calibrated from "
            f"usage.prompt_tokens of {self.probes} probe requests)"
        )

    async def count(self, prompt: Prompt) -> int:
        return self.estimate(_chars(prompt))

    def estimate(self, chars: int) -> int:
        return max(1, round(self.slope * chars + self.intercept))

    @classmethod
    async def calibrate(
        cls, http: httpx.AsyncClient, model: str, chat: bool, texts: list[Prompt]
    ) -> ApproxCounter:
        """Fit the line to probes; the ± is the largest residual (at least 1)."""
        points: list[tuple[int, int]] = []
        for prompt in texts:
            try:
                used = await probe_prompt_tokens(http, model, chat, prompt)
            except TokenizeError:
                break  # too long for the model, most likely: fit what we have
            if used is None:
                raise TokenizeError("the server reports no usage.prompt_tokens: cannot calibrate")
            points.append((_chars(prompt), used))
        if len(points) < 2:
            raise TokenizeError("fewer than two calibration probes succeeded")
        slope, intercept = _line(points)
        if not slope > 0:
            raise TokenizeError("usage.prompt_tokens does not grow with the prompt")
        worst = max(abs(slope * x + intercept - y) for x, y in points)
        return cls(slope, intercept, max(1, math.ceil(worst)), len(points))


def _chars(prompt: Prompt) -> int:
    return sum(len(c) for _, c in prompt_pairs(prompt))


def _line(points: list[tuple[int, int]]) -> tuple[float, float]:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return slope, my - slope * mx


async def make_counter(
    http: httpx.AsyncClient, model: str, chat: bool, probes: list[Prompt]
) -> Counter:
    """The best counter this server allows: its tokenizer (calibrated), else the probe line."""
    tok = ServerTokenizer(http, model, chat)
    if await tok.detect() is not None:
        await tok.calibrate(probes[0])
        return tok
    try:
        return await ApproxCounter.calibrate(http, model, chat, probes)
    except TokenizeError:
        return ApproxCounter(1 / GUESS_CHARS_PER_TOKEN, 0.0, 0, probes=0)
